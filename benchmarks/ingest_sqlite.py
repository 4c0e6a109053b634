"""Benchmark: `mining ingest` of the SQLite yfcc100m_dataset file vs a plain sqlite3 scan of it.

Generates an N-row SQLite file (default 200,000 rows; table yfcc100m_dataset, the 23 columns
as TEXT: the demo world's rows from fixtures/yfcc_rows.py, 3 % malformed, the
wrong-field-count ones left out as a table cannot hold them), then times, alternating
--repeat times in this process (the fastest of each counts; all times are printed):
  (a) the reference: `for row in conn.execute("select * from yfcc100m_dataset"): pass`
      (Python's sqlite3 module, one thread: what reading the table costs at the least);
  (b) `mining.stages.ingest.ingest` of the file (rowid ranges on --workers parser threads, typed
      Parquet, quarantine, stats);
  (c) with --tsv: ingest of the same rows as a 23-field TSV file.
Prints JSON: rows, file_mb, scan_s, ingest_s, rows_per_s of each, ratio = ingest_s / scan_s
(lower is better), the ingest's stats (rows_in/out/rejected), all times, CPU count and the
load average before and after (the machine may be shared).

    nice .venv/bin/python -m benchmarks.ingest_sqlite [--rows N] [--workdir DIR] [--repeat 3]
        [--workers N] [--tsv]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path


def generate(path: Path, rows: int, seed: int = 0, malformed: float = 0.03) -> int:
    """An N-row SQLite yfcc100m_dataset file (and nothing else); return its row count."""
    from fixtures.yfcc_rows import iter_lines, write_sqlite  # shared with the tests: run with -m

    lines = (line.split("\t") for line, _ in iter_lines(rows, seed=seed, nfields=23, malformed=malformed))
    return write_sqlite(path, (f for f in lines if len(f) == 23))


def _tsv(db: Path, path: Path) -> None:
    """The same rows, in rowid order, as a 23-field TSV file."""
    conn = sqlite3.connect(db)
    try:
        with open(path, "w", encoding="utf-8") as f:
            for row in conn.execute("SELECT * FROM yfcc100m_dataset ORDER BY rowid"):
                f.write("\t".join(row) + "\n")
    finally:
        conn.close()


def _scan(db: Path) -> float:
    t = time.perf_counter()
    conn = sqlite3.connect(db)
    try:
        for _row in conn.execute("select * from yfcc100m_dataset"):
            pass
    finally:
        conn.close()
    return time.perf_counter() - t


def _ingest(src: Path, out: Path, workers: int | None) -> tuple[float, dict]:
    from mining.stages.ingest import stage as ingest

    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    stats = ingest.run(paths=[src], out=out, progress=False, workers=workers, force=True)
    return time.perf_counter() - t, stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--workdir", type=Path, help="keep the files here (default: a temporary folder)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, help="ingest's parser threads (default: ingest's own)")
    ap.add_argument("--tsv", action="store_true", help="also time ingest of the same rows as TSV")
    a = ap.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-ingest-sqlite-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        db = work / f"yfcc100m_dataset-{a.rows}.sql"
        if not db.exists():
            generate(db, a.rows)
        if a.tsv and not (work / f"{db.stem}.tsv").exists():
            _tsv(db, work / f"{db.stem}.tsv")
        load_before = os.getloadavg()
        cpu0 = time.process_time()
        times: dict[str, list[float]] = {"scan": [], "ingest": [], "ingest_tsv": []}
        stats: dict = {}
        for _ in range(a.repeat):
            times["scan"].append(_scan(db))
            seconds, stats = _ingest(db, work / "out", a.workers)
            times["ingest"].append(seconds)
            if a.tsv:
                times["ingest_tsv"].append(_ingest(work / f"{db.stem}.tsv", work / "out-tsv", a.workers)[0])
        rows = stats["rows_in"]
        scan_s, ingest_s = min(times["scan"]), min(times["ingest"])
        out = {
            "rows": rows,
            "file_mb": round(db.stat().st_size / 1e6, 1),
            "scan_s": round(scan_s, 3),
            "ingest_s": round(ingest_s, 3),
            "scan_rows_per_s": round(rows / scan_s),
            "ingest_rows_per_s": round(rows / ingest_s),
            "ratio": round(ingest_s / scan_s, 2),
            "ingest": {k: stats[k] for k in ("rows_in", "rows_out", "rows_rejected")},
            "times": {k: [round(t, 3) for t in v] for k, v in times.items() if v},
            "workers": a.workers,
            "cpu_s_this_process": round(time.process_time() - cpu0, 1),
            "cpus": os.cpu_count(),
            "loadavg": {"before": [round(x, 1) for x in load_before], "after": [round(x, 1) for x in os.getloadavg()]},
        }
        if a.tsv:
            out["ingest_tsv_s"] = round(min(times["ingest_tsv"]), 3)
            out["ingest_tsv_rows_per_s"] = round(rows / min(times["ingest_tsv"]))
        print(json.dumps(out, indent=2))
    finally:
        if a.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
