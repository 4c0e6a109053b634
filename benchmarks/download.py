"""Benchmark `mining download` against img2dataset on the same local server and URL list.

The demo's Flickr-like server, scripted (fixtures/scripted_server.py, in its own process, a
fresh one for each timed run) serves N ~1024 px JPEGs (220 kB), some of them faulty: deleted
photos (302 to a placeholder PNG on another host name), truncated bodies, slow answers
(after --slow-s) and stalls (the body stops for --stall-s, past both tools' --timeout).
Both downloaders get the same URLs, the same processes x threads and the same timeout; each
run is timed, with its CPU (all its processes) and the server's CPU over the same interval,
and we count what each stored as a success. Runs alternate which tool goes first.
img2dataset is installed on first use into benchmarks/.venv-img2dataset (its own pins).
Run from the repository root (the server child imports fixtures/ as a package):

    .venv/bin/python -m benchmarks.download [--n 5000] [--processes 2] [--threads 64] [--repeats 2]
    .venv/bin/python -m benchmarks.download --slow 0 --stall 0   # placeholders + truncated only

Prints JSON: per run and tool the wall time, URLs/s, client and server CPU ms per URL and a
correctness table; the ratios (img2dataset's wall / ours) and their median.
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
from typing import Callable

from fixtures.scripted_server import ScriptedServer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = HERE / ".venv-img2dataset"
ENV = dict(os.environ, NO_ALBUMENTATIONS_UPDATE="1", WANDB_MODE="disabled", WANDB_SILENT="true")
FAULTS = ("placeholder_offsite", "truncated", "slow", "stall")


def ensure_img2dataset() -> Path:
    exe = VENV / "bin" / "img2dataset"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "img2dataset==1.47.0",
                        "opencv-python-headless<5", "pandas<3"], check=True, env=ENV)
    return exe


def behaviour(n: int, seed: int, rates: dict[str, float]) -> dict[int, str]:
    """Each photo's fault (or `ok`), drawn once from `rates` (same seed: same faults)."""
    rng = random.Random(seed)
    kinds = {}
    for pid in range(1, n + 1):
        r, acc, kinds[pid] = rng.random(), 0.0, "ok"
        for k in FAULTS:
            acc += rates[k]
            if r < acc:
                kinds[pid] = k
                break
    return kinds


def rates_of(args: argparse.Namespace) -> dict[str, float]:
    return {"placeholder_offsite": args.placeholder, "truncated": args.truncated, "slow": args.slow,
            "stall": args.stall}


def serve(port_file: str, args: argparse.Namespace) -> None:
    """Server process: runs until killed; writes its port once listening."""
    s = ScriptedServer(behaviour(args.n, args.seed, rates_of(args)), slow_s=args.slow_s, stall_s=args.stall_s)
    with s:
        port = s.port
        s.placeholder_url = f"http://localhost:{port}/images/photo_unavailable.png"  # "another host"
        Path(port_file + ".tmp").write_text(str(port))
        os.replace(port_file + ".tmp", port_file)
        while True:
            time.sleep(3600)


def start_server(work: Path, args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    """A fresh server process per timed run: no state (logs, caches) carried from the other tool."""
    port_file = work / "port"
    port_file.unlink(missing_ok=True)
    proc = subprocess.Popen(cwd=ROOT, args=[
        sys.executable, "-m", "benchmarks.download", "--serve", str(port_file), "--n", str(args.n),
        "--seed", str(args.seed), "--placeholder", str(args.placeholder), "--truncated", str(args.truncated),
        "--slow", str(args.slow), "--stall", str(args.stall), "--slow-s", str(args.slow_s),
        "--stall-s", str(args.stall_s)])
    for _ in range(3000):  # a loaded shared machine can take minutes to start a Python process
        if port_file.exists():
            return proc, f"http://127.0.0.1:{port_file.read_text()}"
        if proc.poll() is not None:
            raise SystemExit(f"benchmark server exited with {proc.returncode}")
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("benchmark server did not start in 300 s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(work: Path, args: argparse.Namespace, command: Callable[[str], list[str]]) -> dict:
    """Run one downloader (`command(host)`) against a fresh server: wall time, the CPU of all its
    processes (reaped children) and the server's CPU over the same interval."""
    import resource

    server, host = start_server(work, args)
    try:
        cmd = command(host)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        s0, t0 = cpu_seconds(server.pid), time.monotonic()
        subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall, server_cpu = time.monotonic() - t0, cpu_seconds(server.pid) - s0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        server.kill()
        server.wait()
    client_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "client_cpu_s": client_cpu, "server_cpu_s": server_cpu}


def run_ours(work: Path, args: argparse.Namespace) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = args.n
    cand = work / "candidates.parquet"
    ids = list(range(1, n + 1))
    pq.write_table(pa.table({"photo_id": ids, "server_id": [65535] * n, "secret": ["5ec4e7"] * n,
                             "secret_original": ["0a1b"] * n, "extension": ["jpg"] * n}), cand)
    out = work / "ours"

    def command(host: str) -> list[str]:
        cmd = [str(ROOT / ".venv" / "bin" / "mining"), "download", "--candidates", str(cand), "--out", str(out), "--host", host,
               "--workers", str(args.processes), "--shard-size", str((n + args.processes - 1) // args.processes),
               "--no-progress", "--timeout", str(args.timeout), "--retries", "1", "--min-ok-fraction", "0"]
        return cmd + (["--threads", str(args.ours_threads)] if args.ours_threads else [])

    r = timed(work, args, command)
    status = pq.read_table(out / "status").to_pandas()
    r["ok"] = set(status.loc[status.status == "ok", "photo_id"].tolist())
    shutil.rmtree(out, ignore_errors=True)
    return r


def run_img2dataset(work: Path, args: argparse.Namespace) -> dict:
    import pandas as pd

    n = args.n
    exe = ensure_img2dataset()
    urls = work / "urls.txt"
    out = work / "img2dataset"

    def command(host: str) -> list[str]:
        urls.write_text("".join(f"{host}/65535/{i}_5ec4e7_b.jpg\n" for i in range(1, n + 1)))
        return [str(exe), "--url_list", str(urls), "--input_format", "txt", "--output_folder", str(out),
                "--output_format", "files", "--processes_count", str(args.processes),
                "--thread_count", str(args.threads), "--resize_mode", "no", "--skip_reencode", "True",
                "--number_sample_per_shard", str((n + args.processes - 1) // args.processes),
                "--timeout", str(args.timeout), "--retries", "1", "--enable_wandb", "False",
                "--distributor", "multiprocessing", "--disallowed_header_directives", "[]"]

    r = timed(work, args, command)
    df = pd.concat([pd.read_parquet(p) for p in sorted(out.glob("*.parquet"))])
    r["ok"] = {int(u.rsplit("/", 1)[1].split("_")[0]) for u in df.loc[df.status == "success", "url"]}
    shutil.rmtree(out, ignore_errors=True)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--threads", type=int, default=64, help="img2dataset's threads per process")
    ap.add_argument("--ours-threads", type=int, default=64, help="our --threads (0: the CLI's default)")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-request timeout, both tools")
    ap.add_argument("--placeholder", type=float, default=0.05)
    ap.add_argument("--truncated", type=float, default=0.05)
    ap.add_argument("--slow", type=float, default=0.05, help="share of photos answered after --slow-s")
    ap.add_argument("--slow-s", type=float, default=1.0)
    ap.add_argument("--stall", type=float, default=0.005, help="share of photos whose body stops for --stall-s")
    ap.add_argument("--stall-s", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=2, help="runs of each tool, alternating which goes first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--serve", metavar="PORT_FILE")
    args = ap.parse_args()
    if args.serve:
        return serve(args.serve, args)
    kinds = behaviour(args.n, args.seed, rates_of(args))
    ensure_img2dataset()
    work = Path(tempfile.mkdtemp(prefix="bench-download-"))
    good = {p for p, k in kinds.items() if k in ("ok", "slow")}

    def table(ok: set[int]) -> dict:
        return {"stored": len(ok), "good_stored": len(ok & good), "good_total": len(good),
                "placeholders_stored": sum(1 for p in ok if kinds[p] == "placeholder_offsite"),
                "truncated_stored": sum(1 for p in ok if kinds[p] == "truncated")}

    def figures(r: dict) -> dict:
        return {"wall_s": round(r["wall_s"], 2), "urls_per_s": round(args.n / r["wall_s"], 1),
                "images_per_s": round(len(r["ok"]) / r["wall_s"], 1),
                "client_cpu_s": round(r["client_cpu_s"], 1), "server_cpu_s": round(r["server_cpu_s"], 1),
                "client_cpu_ms_per_url": round(1000 * r["client_cpu_s"] / args.n, 2),
                "server_cpu_ms_per_url": round(1000 * r["server_cpu_s"] / args.n, 2),
                "cores_busy": round((r["client_cpu_s"] + r["server_cpu_s"]) / r["wall_s"], 2),
                "correctness": table(r["ok"])}

    runs = []
    try:
        for i in range(args.repeats):
            order = [("img2dataset", run_img2dataset), ("ours", run_ours)]
            order = order if i % 2 == 0 else order[::-1]
            load = os.getloadavg()[0]
            res = {name: fn(work, args) for name, fn in order}
            runs.append({"first": order[0][0], "load_average_1min": round(load, 1), "ours": figures(res["ours"]),
                         "img2dataset": figures(res["img2dataset"]),
                         "ratio_urls_per_s": round(res["img2dataset"]["wall_s"] / res["ours"]["wall_s"], 3)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratios = sorted(r["ratio_urls_per_s"] for r in runs)
    mid = len(ratios) // 2
    print(json.dumps({
        "urls": args.n, "processes": args.processes, "img2dataset_threads_per_process": args.threads,
        "ours_threads_per_process": args.ours_threads or "CLI default", "timeout_s": args.timeout,
        "faults": {k: sum(v == k for v in kinds.values()) for k in FAULTS},
        "slow_s": args.slow_s, "stall_s": args.stall_s,
        "runs": runs, "ratio_urls_per_s": ratios,
        "ratio_median": ratios[mid] if len(ratios) % 2 else round((ratios[mid - 1] + ratios[mid]) / 2, 3),
    }, indent=2))


if __name__ == "__main__":
    main()
