"""Bulk synthetic `yfcc100m_dataset` rows for tests and benchmarks (no real metadata is reachable).

The rows are the demo world's: `mining.stages.demo.metadata`'s PhotoRecord, vocabularies, row
formatter (`row_fields`) and malformed rows (`malform`, one defect per row named by the reject
reason ingest gives for it). Only the draws differ: the demo draws field by field with numpy
scalar calls (its bytes are fixed per seed); here each batch of rows is drawn at once, so that
benchmarks can make millions of rows. Half the rows are geotagged at demo places (a pool drawn
once with `sample_place`), 1 % are videos, 1 % carry the junk date, and a chosen fraction is
malformed (a reason of `MALFORMED` at random, then one of its defects), so the quarantine and
the stats can be checked against what was planted. Layouts: 25 fields, or 23 (the line number
and photo hash left out).
"""

from __future__ import annotations

import bz2
import gzip
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from mining import atomic
from mining.stages.demo import metadata as md

BATCH = 10_000
PLACES = 1024  # distinct geotags in the pool
REASONS = list(md.MALFORMED)
_THEMES = list(md._TITLES)
_LICENSE_P = md._LICENSE_WEIGHTS / md._LICENSE_WEIGHTS.sum()


@lru_cache(maxsize=1)
def place_pool() -> tuple[md.Place, ...]:
    """Demo places (the demo's own sampler: geodesic jitter, exact exclusion truth), drawn once."""
    rng = np.random.default_rng(20_240_101)
    return tuple(md.sample_place(rng) for _ in range(PLACES))


def _hexes(rng: np.random.Generator, n: int, digits: int) -> list[str]:
    text = rng.bytes(n * digits // 2).hex()
    return [text[i:i + digits] for i in range(0, n * digits, digits)]


def rows(rng: np.random.Generator, n: int, first_line: int, first_id: int) -> Iterator[list[str]]:
    """`n` well-formed 25-field rows (photo ids first_id, first_id + 1, ...), drawn as one batch."""
    pool = place_pool()
    geo = (rng.random(n) < 0.5).tolist()
    place_i = rng.integers(0, len(pool), n).tolist()
    theme_i = rng.integers(0, len(_THEMES), n).tolist()
    video = (rng.random(n) < 0.01).tolist()
    png = (rng.random(n) < 0.03).tolist()
    secret, other = _hexes(rng, n, 10), _hexes(rng, n, 10)
    same = (rng.random(n) < 0.3).tolist()
    server, farm = rng.integers(1, 9999, n).tolist(), rng.integers(1, 10, n).tolist()
    user, node = rng.integers(10_000_000, 99_999_999, n).tolist(), rng.integers(0, 9, n).tolist()
    year = rng.integers(2004, 2015, n)
    when = np.stack([year, rng.integers(1, 13, n), rng.integers(1, 29, n), rng.integers(0, 24, n),
                     rng.integers(0, 60, n), rng.integers(0, 60, n)], axis=1).tolist()
    uploaded = (1_100_000_000 + (year - 2004) * 31_536_000 + rng.integers(0, 40_000_000, n)).tolist()
    junk = (rng.random(n) < 0.01).tolist()
    title_u, desc = rng.random(n).tolist(), (rng.random(n) >= 0.5).tolist()
    n_tags, tag_u = rng.integers(0, 5, n).tolist(), rng.random((n, 4)).tolist()
    tag_place, comma = (rng.random(n) < 0.5).tolist(), (rng.random(n) < 0.1).tolist()
    machine = (rng.random(n) >= 0.9).tolist()
    lic = rng.choice(len(md.LICENSES), n, p=_LICENSE_P).tolist()
    acc_sea, acc_land = rng.integers(1, 6, n).tolist(), rng.integers(11, 17, n).tolist()
    photo_hash = _hexes(rng, n, 32)
    nick, device = rng.integers(0, len(md.NICKS), n).tolist(), rng.integers(0, len(md.DEVICES), n).tolist()
    for i in range(n):
        place = pool[place_i[i]] if geo[i] else None
        theme = _THEMES[theme_i[i]]
        ext = "mp4" if video[i] else ("png" if png[i] else "jpg")
        rec = md.PhotoRecord(first_line + i, first_id + i, server[i], farm[i], secret[i],
                             secret[i] if same[i] else other[i], ext, int(video[i]), place, theme)
        titles, tags = md._TITLES[theme], md._TAGS[theme]
        title = titles[int(title_u[i] * len(titles))]
        chosen = sorted({tags[int(u * len(tags))] for u in tag_u[i][:n_tags[i]]})
        if place is not None and tag_place[i]:
            chosen.append(md.place_tag(place))
        if comma[i]:
            chosen.append(md.COMMA_TAG)
        taken = md.JUNK_DATE if junk[i] else "{}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}.0".format(*when[i])
        acc = "" if place is None else str(acc_sea[i] if place.group == "sea" else acc_land[i])
        yield md.row_fields(rec, md.RowText(
            photo_hash[i], f"{user[i]}@N0{node[i]}", md.NICKS[nick[i]], taken, uploaded[i], md.DEVICES[device[i]],
            title, md.description(title) if desc[i] else "", chosen, md.MACHINE_TAGS if machine[i] else "", lic[i], acc))


def iter_lines(n_rows: int, seed: int = 0, nfields: int = 25, malformed: float = 0.03,
               first_id: int = 1_000_000) -> Iterator[tuple[str, str | None]]:
    """(line, planted reject reason or None) for `n_rows` rows of an `nfields` (25 or 23) file."""
    if nfields not in (25, 23):
        raise ValueError(f"nfields must be 25 or 23, not {nfields}")
    rng = np.random.default_rng(seed)
    for start in range(0, n_rows, BATCH):
        n = min(BATCH, n_rows - start)
        bad = (rng.random(n) < malformed).tolist()
        reason_i, defect_u = rng.integers(0, len(REASONS), n).tolist(), rng.random(n).tolist()
        for i, fields in enumerate(rows(rng, n, start, first_id + start)):
            reason = None
            if bad[i]:
                reason = REASONS[reason_i[i]]
                defects = md.MALFORMED[reason]
                fields = md.malform(fields, reason, defects[int(defect_u[i] * len(defects))], rng)
            if nfields == 23:
                del fields[2], fields[0]  # photo hash, line number (no defect touches them)
            yield "\t".join(fields), reason


def write_synthetic(path: Path, n_rows: int, seed: int = 0, nfields: int = 25,
                    malformed: float = 0.03, first_id: int = 1_000_000) -> dict[str, int]:
    """Write a synthetic dataset file (compressed by suffix .bz2/.gz); return planted reasons' counts."""
    planted: dict[str, int] = {}
    path = Path(path)
    opener = bz2.open if path.suffix == ".bz2" else gzip.open if path.suffix == ".gz" else open
    with atomic.atomic_path(path) as tmp:
        with opener(tmp, "wb") as f:  # type: ignore[operator]
            buf: list[str] = []
            for line, reason in iter_lines(n_rows, seed, nfields, malformed, first_id):
                if reason:
                    planted[reason] = planted.get(reason, 0) + 1
                buf.append(line)
                if len(buf) >= BATCH:
                    f.write(("\n".join(buf) + "\n").encode("utf-8"))
                    buf = []
            if buf:
                f.write(("\n".join(buf) + "\n").encode("utf-8"))
    return planted


# the SQLite file's columns (the Multimedia Commons' yfcc100m_dataset.sql), 23-field order;
# `typed` declares the numeric ones INTEGER/REAL (SQLite then stores numbers, not their text)
SQLITE_COLUMNS = ("photoid", "uid", "unickname", "datetaken", "dateuploaded", "capturedevice", "title",
                  "description", "usertags", "machinetags", "longitude", "latitude", "accuracy", "pageurl",
                  "downloadurl", "licensename", "licenseurl", "serverid", "farmid", "secret", "secretoriginal",
                  "ext", "marker")
_SQLITE_TYPES = {"photoid": "INTEGER", "dateuploaded": "INTEGER", "longitude": "REAL", "latitude": "REAL",
                 "accuracy": "INTEGER", "serverid": "INTEGER", "farmid": "INTEGER", "marker": "INTEGER"}


def write_sqlite(path: Path, rows: Iterable[Sequence[object]], typed: bool = False,
                 columns: Sequence[str] = SQLITE_COLUMNS, table: str = "yfcc100m_dataset",
                 untyped: bool = False) -> int:
    """Write rows (sequences of values, one per column: str (TEXT, which a `typed` column turns
    into a number where it looks like one), bytes (BLOB), int, float or None) into a new SQLite
    table; return the row count. `untyped`: columns without a type (values stored as given)."""
    import sqlite3

    path = Path(path)
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    try:
        kind = (lambda c: "") if untyped else (lambda c: _SQLITE_TYPES.get(c, "TEXT") if typed else "TEXT")
        decl = ", ".join(f"{c} {kind(c)}" for c in columns)
        conn.execute(f"CREATE TABLE {table} ({decl})")
        n = 0
        insert = f"INSERT INTO {table} VALUES ({', '.join('?' for _ in columns)})"
        batch: list[Sequence[object]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= BATCH:
                conn.executemany(insert, batch)
                n, batch = n + len(batch), []
        conn.executemany(insert, batch)
        conn.commit()
        return n + len(batch)
    finally:
        conn.close()
