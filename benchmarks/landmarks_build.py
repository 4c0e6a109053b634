"""`mining landmarks build` at scale: its time and peak memory against the table's rows.

Usage: python -m benchmarks.landmarks_build [--rows 20000 100000] [--duplicates 1000000] [--out FILE]

The tables (made here, in a temporary folder): landmarks of 50 rows each, 5 query rows (a box
of the whole image) and 45 database rows (15 easy, 15 hard, 15 junk), every row its own
32 × 24 JPEG (~700 bytes; the same bytes under another name); 20k rows are 400 landmarks,
2,000 queries and 18,000 database images. The duplicates case: one query row and its image,
then one easy row repeated `--duplicates` times (every repeat a "labelled twice" refusal),
which build must refuse in one line without holding a message per row.

Each case runs in its own process (`--one`), which reports its wall time and peak RSS
(ru_maxrss), and the reference measured right after it: the same images read and written
once (`copy_seconds`, the file I/O no build can avoid). The growth exponent b (time ∝ rows^b)
between the two sizes says whether the build is linear (b ≈ 1), whatever the machine. Prints
JSON.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from PIL import Image

HEADER = "image,landmark,role,query,x1,y1,x2,y2"
PER_LANDMARK = (5, 15, 15, 15)  # queries, easy, hard, junk
SIZE = (32, 24)


def _jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", SIZE, (120, 90, 60)).save(buf, "JPEG")
    return buf.getvalue()


def make_table(root: Path, rows: int) -> Path:
    """A table of `rows` rows (rounded down to whole landmarks) and its images under root/img/."""
    data, img = _jpeg(), root / "img"
    img.mkdir(parents=True)
    w, h = SIZE
    lines = [HEADER]
    q, e, hd, j = PER_LANDMARK
    for lm in range(rows // sum(PER_LANDMARK)):
        roles = ["query"] * q + ["easy"] * e + ["hard"] * hd + ["junk"] * j
        for k, role in enumerate(roles):
            name = f"l{lm:06d}_{k:02d}.jpg"
            (img / name).write_bytes(data)
            box = f"0,0,{w},{h}" if role == "query" else ",,,"
            lines.append(f"img/{name},lm{lm},{role},,{box}")
    (root / "table.csv").write_text("\n".join(lines) + "\n")
    return root / "table.csv"


def make_duplicates(root: Path, rows: int) -> Path:
    data, img = _jpeg(), root / "img"
    img.mkdir(parents=True)
    (img / "q.jpg").write_bytes(data)
    (img / "p.jpg").write_bytes(data)
    w, h = SIZE
    with open(root / "table.csv", "w") as f:
        f.write(f"{HEADER}\nimg/q.jpg,tower,query,,0,0,{w},{h}\n")
        f.write("img/p.jpg,tower,easy,,,,,\n" * rows)
    return root / "table.csv"


def one(case: str, rows: int) -> dict[str, Any]:
    """Make the table, then build it (timed, in this process); the figures of that build."""
    from mining.errors import UserError
    from mining.datasets.landmarkbuild import build_landmarks

    with tempfile.TemporaryDirectory(prefix="lmbuild-") as tmp:
        root = Path(tmp)
        table = make_duplicates(root, rows) if case == "duplicates" else make_table(root, rows)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        try:
            build_landmarks(table, root / "out", "bench")
            refused = None
        except UserError as exc:
            refused = str(exc)
        seconds = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()  # the reference: the images read and written once, nothing else
        (root / "copy").mkdir()
        for src in sorted((root / "img").iterdir()) if case != "duplicates" else []:
            (root / "copy" / src.name).write_bytes(src.read_bytes())
        copy = time.perf_counter() - t0 if case != "duplicates" else None
    return {"case": case, "rows": rows, "seconds": round(seconds, 2), "copy_seconds": None if copy is None else round(copy, 2),
            "ratio_to_copy": round(seconds / copy, 1) if copy else None, "peak_rss_mb": round(peak / 1024, 1),
            "rss_before_build_mb": round(before / 1024, 1),
            "refused": None if refused is None else refused[:200], "refusal_lines": None if refused is None
            else refused.count("\n") + 1}


def _run(case: str, rows: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "benchmarks.landmarks_build", "--one", case, str(rows)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, nargs=2, default=[20_000, 100_000])
    ap.add_argument("--duplicates", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--one", nargs=2, metavar=("CASE", "ROWS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]))))
        return 0
    small, big = (_run("table", n) for n in args.rows)
    dup = _run("duplicates", args.duplicates)
    b = math.log(big["seconds"] / small["seconds"]) / math.log(big["rows"] / small["rows"])
    doc = {"table": PER_LANDMARK, "image": list(SIZE), "builds": [small, big], "growth_exponent": round(b, 2),
           "duplicates": dup}
    text = json.dumps(doc, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
