"""Two runs of the workflow compared file by file: a refactor's proof that every output is the
same bytes (issue 46's item 8, and every change that says "outputs unchanged").

A file counts as the same when its bytes are equal; else when they are equal once the run's own
folder (`--root-a`/`--root-b`: the folder holding `results/`) and the demo server's port
(`127.0.0.1:PORT`) are written alike; else, for Parquet, when the tables are equal under the
same rewriting. What is left differs; for a JSON file the keys that differ are named (two
levels deep), so that timings (`seconds`, `elapsed_s`), the code's commit and the files that
record them (logs, benchmarks/*.tsv, SHA256SUMS, report.html, the review databases' times) can
be told from a real change. Reference, the same way: two runs of one commit differ in exactly
those.

    python -m benchmarks.same_bytes RUN_A/results/demo RUN_B/results/demo [--root-a A] [--root-b B]
Prints one line per differing, missing or extra file, then JSON counts.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from mining.files.checksums import file_sha256

PORT = re.compile(rb"127\.0\.0\.1:\d+")  # the demo's web server listens on a free port


def files(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def normalised(data: bytes, root: bytes) -> bytes:
    return PORT.sub(b"127.0.0.1:<PORT>", data.replace(root, b"<RUN>"))


def _value(v: Any, root: bytes) -> Any:
    if isinstance(v, str):
        return normalised(v.encode(), root).decode()
    if isinstance(v, list):
        return [_value(x, root) for x in v]
    return v


def tables_equal(a: Path, b: Path, root_a: bytes, root_b: bytes) -> bool:
    import pyarrow.parquet as pq

    ta, tb = pq.read_table(a), pq.read_table(b)
    return ta.schema.equals(tb.schema) and all(
        [_value(v, root_a) for v in ca.to_pylist()] == [_value(v, root_b) for v in cb.to_pylist()]
        for ca, cb in zip(ta.columns, tb.columns))


def keys_differ(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k) != b.get(k):
                deeper = isinstance(a.get(k), dict) and isinstance(b.get(k), dict) and not prefix.count(".")
                out += keys_differ(a[k], b[k], f"{prefix}{k}.") if deeper else [f"{prefix}{k}"]
        return out
    return [] if a == b else [prefix.rstrip(".") or "<value>"]


def compare(a: Path, b: Path, root_a: Path, root_b: Path) -> tuple[list[str], dict[str, int]]:
    fa, fb = files(a), files(b)
    ra, rb = str(root_a).encode(), str(root_b).encode()
    lines: list[str] = []
    counts = {"same": 0, "same_but_run_folder": 0, "same_table_not_bytes": 0, "differ": 0}
    for rel in sorted(set(fa) & set(fb)):
        if file_sha256(fa[rel]) == file_sha256(fb[rel]):
            counts["same"] += 1
        elif normalised(fa[rel].read_bytes(), ra) == normalised(fb[rel].read_bytes(), rb):
            counts["same_but_run_folder"] += 1
        elif rel.endswith(".parquet") and tables_equal(fa[rel], fb[rel], ra, rb):
            counts["same_table_not_bytes"] += 1
            lines.append(f"TABLE-SAME {rel}")
        else:
            counts["differ"] += 1
            note = ""
            if rel.endswith(".json"):
                try:
                    note = " keys: " + ", ".join(keys_differ(json.loads(fa[rel].read_bytes()),
                                                            json.loads(fb[rel].read_bytes())))
                except ValueError as exc:
                    note = f" (not JSON: {exc})"
            lines.append(f"DIFFER {rel}{note}")
    lines += [f"ONLY-A {rel}" for rel in sorted(set(fa) - set(fb))]
    lines += [f"ONLY-B {rel}" for rel in sorted(set(fb) - set(fa))]
    counts.update(only_a=len(set(fa) - set(fb)), only_b=len(set(fb) - set(fa)))
    return lines, counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path, help="a run's results folder (RESULTS/)")
    ap.add_argument("b", type=Path, help="the other run's")
    ap.add_argument("--root-a", type=Path, help="the folder run A ran in, as its files spell it (default: "
                                                "A's grandparent; give it when A was copied elsewhere)")
    ap.add_argument("--root-b", type=Path, help="the same for B")
    args = ap.parse_args()
    a, b = args.a.resolve(), args.b.resolve()
    lines, counts = compare(a, b, args.root_a or a.parents[1], args.root_b or b.parents[1])
    print("\n".join(lines + [json.dumps(counts)]))


if __name__ == "__main__":
    main()
