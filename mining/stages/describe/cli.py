"""CLI for `mining describe`: image set -> descriptor store for one retrieval method."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mining.settings import options
from mining.flags import add_progress_flag, cluster_of


def register(sub: argparse._SubParsersAction) -> None:
    from mining.stages.describe.stage import FIT_IMAGES, FIT_SEED

    p = sub.add_parser(
        "describe", help="describe an image set with a retrieval method (sharded, resumable, Dask)",
        description="Describe landmark queries (bbox crops), the landmark database, or downloaded candidates "
                    "with one retrieval method; writes a descriptor store. Methods that learn (whitening, "
                    "codebooks) learn on candidates; describe landmark sets with --model CANDIDATE_STORE.")
    p.add_argument("--method", required=True,
                   help="cnn-gem, rsift-asmk, rsift-vlad, onnx-global (onnx-global-NAME: another ONNX model, set by "
                        "--param onnx-global-NAME:model=FILE ...), or a plug-in module:Class; several, comma-separated, are "
                        "described in one pass (one decode per image, one RootSIFT shared by rsift-asmk and "
                        "rsift-vlad), each into its own store: then --out (and --model) contain {method}")
    p.add_argument("--images", required=True, help="landmark dataset (gnd_*.pkl or its folder) or a download folder")
    p.add_argument("--set", required=True, dest="image_set", choices=["queries", "database", "candidates"])
    p.add_argument("--out", required=True, help="descriptor store folder to write (resumed if present); "
                                                   "{method} is replaced by the method's name")
    p.add_argument("--model", help="candidates store of the same method, whose learned state and settings to reuse "
                                   "({method} as in --out)")
    p.add_argument("--shortlist", type=Path, metavar="SHORTLIST.parquet",
                   help="a cascade's shortlist (`mining cascade shortlist`): describe only the candidates it lists "
                        "(--set candidates; docs/cascade.md)")
    p.add_argument("--workers", type=int, default=2,
                   help="Dask LocalCluster worker processes (default 2; 0 = in this process, no Dask)")
    p.add_argument("--scheduler", help="address of a running Dask scheduler (instead of a LocalCluster)")
    p.add_argument("--slurm", metavar="YAML",
                   help="start dask-jobqueue SLURM workers: a YAML of SLURMCluster keyword arguments (+ `jobs`)")
    options.add_flags(p, "describe", manifest_help="a run manifest: its describe: section (shard_size; params: "
                      "the settings of the methods described here, for the candidates set; a landmark set takes "
                      "its --model store's) and its dask: section; a flag given here wins")
    options.add_flags(p, "dask", keys=["cluster"])
    p.add_argument("--fit-images", type=int, default=FIT_IMAGES, help="candidates sampled for learning (default %(default)s)")
    p.add_argument("--seed", type=int, default=FIT_SEED, help="seed of the learning sample and k-means (default %(default)s)")
    g = p.add_argument_group("method settings (default: the method's; landmark sets take the --model store's)")
    g.add_argument("--param", action="append", default=[], metavar="[METHOD:]KEY=VALUE",
                   help="any setting a method declares (plug-ins included), by its name as in the manifest's "
                        "describe: {params: {METHOD: {KEY: VALUE}}} (the one spelling: whiten=false, dim=128, "
                        "max_side=512): KEY=VALUE goes to the methods that have KEY, METHOD:KEY=VALUE to that method only; VALUE is read as YAML "
                        "(3, 0.5, true, [1, 0.7071], text). Repeatable; over the manifest's (or --params') settings")
    add_progress_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mining.compute.cluster import Cluster
    from mining.stages.describe.params import merged
    from mining.stages.describe.stage import Inputs, Sample, run

    scheduler, slurm = cluster_of(args)
    cluster = Cluster(scheduler=scheduler, slurm=slurm, workers=args.workers)
    methods = [m.strip() for m in args.method.split(",") if m.strip()]
    settings = merged(methods=methods, given=args.param, options=options.from_args(args, "describe"),
                      model=args.model, cluster=cluster)
    infos = run(inputs=Inputs(images=args.images, image_set=args.image_set, models=args.model, shortlist=args.shortlist),
                methods=methods, out=args.out, options=settings, cluster=cluster,
                sample=Sample(images=args.fit_images, seed=args.seed), progress=not args.no_progress)
    for info in infos.values():
        print(json.dumps({k: info[k] for k in ("method", "set", "count", "failed", "dim", "shards")}))
    return 0
