"""The flags that every stage's CLI shares (`--no-progress`, `--landmarks`, where a fan-out stage
runs), below the stages: a stage's cli.py imports them from here, never from `mining.cli`, which
imports every stage."""

from __future__ import annotations

import argparse

from mining.settings import options


def add_progress_flag(p: argparse.ArgumentParser) -> None:
    """Every verb with a progress bar turns it off the same way: `--no-progress`."""
    p.add_argument("--no-progress", dest="no_progress", action="store_true",
                   help="no progress bar (the stage's log still gets its one-line summary)")


def add_landmarks_flag(p: argparse._ActionsContainer, *, required: bool = True, then: str = "") -> None:
    """`--landmarks [NAME=]GND ...`, the same for every verb that reads the landmark datasets
    (parsed by `mining.datasets.benchmarks.as_list`); `then` adds what this verb does with them."""
    p.add_argument("--landmarks", required=required, nargs="+", metavar="[NAME=]GND",
                   help="gnd_<name>.pkl or the folder holding it; several benchmarks: one each, as every stage of the "
                        "run is given them (NAME defaults to the file's <name>; landmarks are then named "
                        "NAME/<landmark>, their stores are in DESC/METHOD/benchmarks/NAME/)" + (f"; {then}" if then else ""))


def add_cluster_flags(p: argparse.ArgumentParser) -> None:
    """Where a fan-out stage runs (download, describe): the manifest's dask: section, or a flag."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", help="use a running Dask scheduler")
    where.add_argument("--workers", type=int, metavar="N", help="LocalCluster worker processes (default min(4, CPUs))")
    where.add_argument("--slurm", metavar="YAML", help="dask-jobqueue SLURMCluster keyword arguments (+ `jobs`)")
    options.add_flags(p, "dask", keys=["cluster"])


def cluster_of(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(scheduler address, SLURM YAML) of a fan-out stage: the flags, else the manifest's dask:
    section (both None: a LocalCluster of --workers)."""
    if args.scheduler or args.slurm:
        return args.scheduler, args.slurm
    d = options.from_args(args, "dask")
    return (d.scheduler if d.cluster == "scheduler" else None), (d.slurm if d.cluster == "slurm" else None)
