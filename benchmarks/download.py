"""Benchmark `mining download` against img2dataset on the same local server and URL list.

A fault-injecting Flickr-like server (tests/helpers/download_server.py, in its own process)
serves N ~1024 px JPEGs, a share of which are deleted photos (302 to a placeholder PNG on
another host name) and truncated bodies. Both downloaders get the same URLs and the same
concurrency (processes x threads); we time each and count what each stored as a success.
img2dataset is installed on first use into benchmarks/.venv-img2dataset (its own pins).

    .venv/bin/python benchmarks/download.py [--n 5000] [--processes 2] [--threads 16]

Prints JSON: images/s for each, the ratio ours / img2dataset, and a correctness table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = HERE / ".venv-img2dataset"
ENV = dict(os.environ, NO_ALBUMENTATIONS_UPDATE="1", WANDB_MODE="disabled", WANDB_SILENT="true")


def ensure_img2dataset() -> Path:
    exe = VENV / "bin" / "img2dataset"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "img2dataset==1.47.0",
                        "opencv-python-headless<5", "pandas<3"], check=True, env=ENV)
    return exe


def behaviour(n: int, seed: int, placeholder: float, truncated: float) -> dict[int, str]:
    rng = random.Random(seed)
    kinds = {}
    for pid in range(1, n + 1):
        r = rng.random()
        kinds[pid] = "placeholder_redirect" if r < placeholder else "truncated" if r < placeholder + truncated else "ok"
    return kinds


def serve(port_file: str, n: int, seed: int, placeholder: float, truncated: float) -> None:
    """Server process: runs until killed; writes its port once listening."""
    from tests.helpers.download_server import FaultServer  # a test helper: the child runs as a module

    s = FaultServer(behaviour(n, seed, placeholder, truncated))
    with s:
        port = s.httpd.server_address[1]
        s.placeholder_url = f"http://localhost:{port}/images/photo_unavailable.png"  # "another host"
        Path(port_file + ".tmp").write_text(str(port))
        os.replace(port_file + ".tmp", port_file)
        while True:
            time.sleep(3600)


def start_server(work: Path, args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    port_file = work / "port"
    proc = subprocess.Popen(cwd=ROOT, args=[sys.executable, "-m", "benchmarks.download", "--serve", str(port_file), "--n", str(args.n),
                             "--seed", str(args.seed), "--placeholder", str(args.placeholder),
                             "--truncated", str(args.truncated)])
    for _ in range(600):
        if port_file.exists():
            return proc, f"http://127.0.0.1:{port_file.read_text()}"
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("benchmark server did not start")


def run_ours(work: Path, host: str, n: int, args: argparse.Namespace) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cand = work / "candidates.parquet"
    ids = list(range(1, n + 1))
    pq.write_table(pa.table({"photo_id": ids, "server_id": [65535] * n, "secret": ["5ecre7"] * n,
                             "secret_original": ["0r1g"] * n, "extension": ["jpg"] * n}), cand)
    out = work / "ours"
    t0 = time.monotonic()
    subprocess.run([str(ROOT / ".venv" / "bin" / "mining"), "download", str(cand), "--out", str(out), "--host", host,
                    "--workers", str(args.processes), "--threads", str(args.threads),
                    "--shard-size", str((n + args.processes - 1) // args.processes), "--no-progress",
                    "--timeout", "20", "--retries", "1"], check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    status = pq.read_table(out / "status").to_pandas() if (out / "status").exists() else None
    ok = set(status.loc[status.status == "ok", "photo_id"].tolist())
    return {"wall_s": wall, "ok": ok, "summary": json.loads((out / "summary.json").read_text())}


def run_img2dataset(work: Path, host: str, n: int, args: argparse.Namespace) -> dict:
    import pandas as pd

    exe = ensure_img2dataset()
    urls = work / "urls.txt"
    urls.write_text("".join(f"{host}/65535/{i}_5ecre7_b.jpg\n" for i in range(1, n + 1)))
    out = work / "img2dataset"
    t0 = time.monotonic()
    subprocess.run([str(exe), "--url_list", str(urls), "--input_format", "txt", "--output_folder", str(out),
                    "--output_format", "files", "--processes_count", str(args.processes),
                    "--thread_count", str(args.threads), "--resize_mode", "no", "--skip_reencode", "True",
                    "--number_sample_per_shard", str((n + args.processes - 1) // args.processes),
                    "--timeout", "20", "--retries", "1", "--enable_wandb", "False", "--distributor", "multiprocessing",
                    "--disallowed_header_directives", "[]"],
                   check=True, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    df = pd.concat([pd.read_parquet(p) for p in sorted(out.glob("*.parquet"))])
    ok = {int(u.rsplit("/", 1)[1].split("_")[0]) for u in df.loc[df.status == "success", "url"]}
    return {"wall_s": wall, "ok": ok}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--placeholder", type=float, default=0.05)
    ap.add_argument("--truncated", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--serve", metavar="PORT_FILE")
    args = ap.parse_args()
    if args.serve:
        return serve(args.serve, args.n, args.seed, args.placeholder, args.truncated)
    kinds = behaviour(args.n, args.seed, args.placeholder, args.truncated)
    ensure_img2dataset()
    work = Path(tempfile.mkdtemp(prefix="bench-download-"))
    server, host = start_server(work, args)
    try:
        theirs = run_img2dataset(work, host, args.n, args)
        ours = run_ours(work, host, args.n, args)
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    good = {p for p, k in kinds.items() if k == "ok"}

    def table(ok: set[int]) -> dict:
        return {"stored": len(ok), "good_stored": len(ok & good), "good_total": len(good),
                "placeholders_stored": sum(1 for p in ok if kinds[p] == "placeholder_redirect"),
                "truncated_stored": sum(1 for p in ok if kinds[p] == "truncated")}

    ours_rate, their_rate = args.n / ours["wall_s"], args.n / theirs["wall_s"]
    print(json.dumps({
        "urls": args.n, "processes": args.processes, "threads_per_process": args.threads,
        "faults": {"placeholder_redirect": sum(k == "placeholder_redirect" for k in kinds.values()),
                   "truncated": sum(k == "truncated" for k in kinds.values())},
        "ours": {"wall_s": round(ours["wall_s"], 2), "urls_per_s": round(ours_rate, 1),
                 "images_per_s": round(len(ours["ok"]) / ours["wall_s"], 1),
                 "mb_per_s": round(ours["summary"]["this_run"]["bytes_per_s"] / 1e6, 1)},
        "img2dataset": {"wall_s": round(theirs["wall_s"], 2), "urls_per_s": round(their_rate, 1),
                        "images_per_s": round(len(theirs["ok"]) / theirs["wall_s"], 1)},
        "ratio_urls_per_s": round(ours_rate / their_rate, 3),
        "correctness": {"ours": table(ours["ok"]), "img2dataset": table(theirs["ok"])},
    }, indent=2))


if __name__ == "__main__":
    main()
