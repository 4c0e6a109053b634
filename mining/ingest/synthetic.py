"""Synthetic `yfcc100m_dataset` rows for tests and benchmarks (no real metadata is reachable).

Rows look like real ones (form-encoded titles/descriptions/tags, half geotagged, CC licences,
photos and a few videos, junk dates) and a chosen fraction is malformed, one reject reason
each, so that the quarantine and the stats can be checked against what was planted.
"""

from __future__ import annotations

import bz2
import gzip
import random
from pathlib import Path
from typing import Iterator

from mining import atomic

LICENSES = [
    ("Attribution License", "http://creativecommons.org/licenses/by/2.0/"),
    ("Attribution-NonCommercial License", "http://creativecommons.org/licenses/by-nc/2.0/"),
    ("Attribution-NonCommercial-NoDerivs License", "http://creativecommons.org/licenses/by-nc-nd/2.0/"),
    ("Attribution-ShareAlike License", "http://creativecommons.org/licenses/by-sa/2.0/"),
]
WORDS = ["tower", "bridge", "old", "town", "church", "river", "sunset", "street", "b%26w", "caf%C3%A9",
         "night", "park", "museum", "square", "o%27brien", "market", "hill", "harbour", "%2C", "sky"]
# Kinds of malformed rows the generator plants, keyed by the reject reason ingest should give.
MALFORMED = ["wrong_field_count", "bad_photo_id", "latitude_out_of_range", "longitude_out_of_range",
             "bad_coordinates", "bad_encoding"]


def _words(rng: random.Random, lo: int, hi: int) -> list[str]:
    return [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]


def synthetic_row(rng: random.Random, photo_id: int, line_no: int, nfields: int = 25) -> list[str]:
    """One well-formed row as its list of (encoded) fields."""
    geo = rng.random() < 0.5
    lic, lic_url = rng.choice(LICENSES)
    server, farm, secret, secret_o = rng.randint(1, 9000), rng.randint(1, 9), f"{rng.getrandbits(40):010x}", f"{rng.getrandbits(40):010x}"
    nsid = f"{rng.randint(10**7, 10**8 - 1)}@N0{rng.randint(0, 8)}"
    desc = "+".join(_words(rng, 0, 40)) if rng.random() < 0.6 else ""
    row = [
        str(photo_id), nsid, "+".join(_words(rng, 1, 2)),
        "4501-01-01 00:00:00.0" if rng.random() < 0.01 else f"20{rng.randint(0, 14):02d}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 12:{rng.randint(10, 59)}:00.0",
        str(rng.randint(1_100_000_000, 1_400_000_000)), rng.choice(["Canon+EOS+5D", "NIKON+D90", "", "Apple+iPhone+4"]),
        "+".join(_words(rng, 1, 5)), desc, ",".join("+".join(_words(rng, 1, 2)) for _ in range(rng.randint(0, 8))), "",
        f"{rng.uniform(-180, 180):.6f}" if geo else "", f"{rng.uniform(-90, 90):.6f}" if geo else "",
        str(rng.randint(1, 16)) if geo else "",
        f"http://www.flickr.com/photos/{nsid}/{photo_id}/",
        f"http://farm{farm}.staticflickr.com/{server}/{photo_id}_{secret}.jpg",
        lic, lic_url, str(server), str(farm), secret, secret_o, "jpg", "1" if rng.random() < 0.01 else "0",
    ]
    if nfields == 25:
        row = [str(line_no), row[0], f"{rng.getrandbits(128):032x}", *row[1:]]
    return row


def malform(rng: random.Random, row: list[str], kind: str, nfields: int = 25) -> list[str]:
    """Break a good row so that ingest must reject it for reason `kind`."""
    off = 2 if nfields == 25 else 0  # index shift of the 25-field layout (line number, hash)
    row = list(row)
    pid, lon, lat, title = 1 if nfields == 25 else 0, 10 + off, 11 + off, 6 + off
    if kind == "wrong_field_count":
        return row[:-1] if rng.random() < 0.5 else [*row, "extra"]
    if kind == "bad_photo_id":
        row[pid] = row[pid] + "x"
    elif kind == "latitude_out_of_range":
        row[lon], row[lat] = "10.0", f"{rng.choice([-1, 1]) * rng.uniform(90.001, 400):.4f}"
    elif kind == "longitude_out_of_range":
        row[lon], row[lat] = f"{rng.choice([-1, 1]) * rng.uniform(180.001, 900):.4f}", "10.0"
    elif kind == "bad_coordinates":
        row[lon], row[lat] = "12.5", "north"
    elif kind == "bad_encoding":
        row[title] = row[title] + ("+%G7" if rng.random() < 0.5 else "+%FF%FE")
    else:
        raise ValueError(kind)
    return row


def iter_lines(n_rows: int, seed: int = 0, nfields: int = 25, malformed: float = 0.03,
               first_id: int = 1_000_000) -> Iterator[tuple[str, str | None]]:
    """(line, planted reject reason or None) for `n_rows` rows."""
    rng = random.Random(seed)
    for i in range(n_rows):
        row = synthetic_row(rng, first_id + i, i, nfields)
        kind = rng.choice(MALFORMED) if rng.random() < malformed else None
        if kind:
            row = malform(rng, row, kind, nfields)
        yield "\t".join(row), kind


def write_synthetic(path: Path, n_rows: int, seed: int = 0, nfields: int = 25,
                    malformed: float = 0.03, first_id: int = 1_000_000) -> dict[str, int]:
    """Write a synthetic dataset file (compressed by suffix .bz2/.gz); return planted reasons' counts."""
    planted: dict[str, int] = {}
    path = Path(path)
    opener = bz2.open if path.suffix == ".bz2" else gzip.open if path.suffix == ".gz" else open
    with atomic.atomic_path(path) as tmp:
        with opener(tmp, "wb") as f:  # type: ignore[operator]
            buf: list[str] = []
            for line, kind in iter_lines(n_rows, seed, nfields, malformed, first_id):
                if kind:
                    planted[kind] = planted.get(kind, 0) + 1
                buf.append(line)
                if len(buf) >= 10000:
                    f.write(("\n".join(buf) + "\n").encode("utf-8"))
                    buf = []
            if buf:
                f.write(("\n".join(buf) + "\n").encode("utf-8"))
    return planted
