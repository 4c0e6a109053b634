"""CLI for `mining demo`: build the embedded demo world, or serve its images like Flickr."""

from __future__ import annotations

import argparse
import os

from mining.files.names import WORLD
from mining.settings import options

FAULT_NAMES = ("not_found", "gone", "forbidden", "placeholder", "throttle", "server_error", "slow", "stall",
               "truncated", "wrong_type", "small")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="build or serve the embedded demo world (synthetic city + Flickr-like server)",
                       description="The embedded default world: landmarks, YFCC100M-format metadata, candidate "
                                   "images, their truth, and a Flickr-like image server with fault injection.")
    dsub = p.add_subparsers(dest="demo_command", required=True, metavar="COMMAND")
    b = dsub.add_parser("build", help="generate a world (deterministic from --preset and --seed)")
    b.add_argument("--out", required=True, help="output folder")
    b.add_argument("--workers", type=int, default=1,
                   help="render processes (0 = all CPUs); the output does not depend on it")
    b.add_argument("--no-resume", action="store_true", help="re-render candidate images that already exist")
    options.add_flags(b, "demo", keys=["preset", "seed", "benchmarks"])
    s = dsub.add_parser("serve", help="serve a built world's images at Flickr-like URLs on 127.0.0.1")
    s.add_argument("world", help="a folder made by `mining demo build`")
    s.add_argument("--rate-limit", type=float, default=None,
                   help="per-client requests/s before 429 (default: from the server; 0 = off)")
    s.add_argument("--no-faults", action="store_true", help="serve every image correctly")
    s.epilog = ("mining demo serve WORLD [options] -- COMMAND ...: serve only while COMMAND runs, with {host} in "
                "its arguments replaced by the server's URL, and exit with its code (used by the workflow).")
    for name in FAULT_NAMES:
        s.add_argument(f"--fault-rate-{name.replace('_', '-')}", type=float, default=None, metavar="P",
                       help=f"share of photos answered with the '{name}' fault (default: --faults, else {WORLD})")
    options.add_flags(s, "demo", keys=["port", "faults"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.demo_command == "build":
        from mining.stages.demo.stage import run_build

        d = options.from_args(args, "demo")
        workers = args.workers if args.workers > 0 else (os.cpu_count() or 1)
        world = run_build(out=args.out, options=d, workers=workers, resume=not args.no_resume)
        c = world["counts"]
        print(f"demo world '{d.preset}' (seed {d.seed}) in {args.out}: {c['landmarks']} landmarks, "
              f"{c['queries']} queries, {c['database']} database images, {c['candidate_images']} candidate images, "
              f"{c['metadata_rows']} metadata rows")
        return 0
    from mining.stages.demo.fake_flickr import serve_forever

    d = options.from_args(args, "demo")
    overrides = {**d.faults, **{n: getattr(args, f"fault_rate_{n}") for n in FAULT_NAMES
                                if getattr(args, f"fault_rate_{n}") is not None}}
    command = list(getattr(args, "passthrough", []))
    return serve_forever(args.world, port=d.port, fault_overrides=overrides, no_faults=args.no_faults,
                         rate_limit=args.rate_limit, command=command or None)
