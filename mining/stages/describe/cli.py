"""CLI for `mining describe`: image set -> descriptor store for one retrieval method."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from mining.settings import options
from mining.flags import add_progress_flag, cluster_of
from mining.errors import UserError

# CLI option -> method parameter (None = the method's default, or the --model store's value)
_PARAMS = {
    "max_side": "max_side", "scales": "scales", "no_whiten": "whiten", "whiten_dim": "whiten_dim",
    "model_file": "model_file", "device": "device", "backend": "backend", "max_features": "max_features",
    "codebook_size": "codebook_size", "vocabulary": "vocabulary", "vlad_dim": "dim",
}


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
    options.add_flags(p, "dask", keys=["cluster"])
    options.add_flags(p, "describe", manifest_help="a run manifest: its describe: section (shard_size; params: "
                      "the settings of the methods described here, for the candidates set; a landmark set takes "
                      "its --model store's) and its dask: section; a flag given here wins")
    p.add_argument("--fit-images", type=int, default=FIT_IMAGES, help="candidates sampled for learning (default %(default)s)")
    p.add_argument("--seed", type=int, default=FIT_SEED, help="seed of the learning sample and k-means (default %(default)s)")
    g = p.add_argument_group("method settings (default: the method's; landmark sets take the --model store's)")
    g.add_argument("--max-side", type=int, help="long side in px images are decoded to (cnn-gem 768, SIFT 1024)")
    g.add_argument("--scales", type=lambda s: [float(x) for x in s.split(",")], help="cnn-gem scales, e.g. 1,0.7071")
    g.add_argument("--no-whiten", action="store_const", const=False, help="cnn-gem: no PCA-whitening")
    g.add_argument("--whiten-dim", type=int, help="cnn-gem: whitened dimension (default 512)")
    g.add_argument("--model-file", help="cnn-gem: TorchScript model (image tensor -> feature map or vector)")
    g.add_argument("--device", help="cnn-gem: auto (GPU if present), cpu, cuda, cuda:1 ...")
    g.add_argument("--backend", help="cnn-gem: onnx (ONNX Runtime, default) or torch; a --model-file runs on torch")
    g.add_argument("--max-features", type=int, help="SIFT methods: keypoints kept per image (default 1000)")
    g.add_argument("--codebook-size", type=int, help="rsift-asmk: visual words (default 512)")
    g.add_argument("--vocabulary", type=int, help="rsift-vlad: k-means words (default 64)")
    g.add_argument("--vlad-dim", type=int, help="rsift-vlad: PCA-whitened dimension (default 512)")
    g.add_argument("--param", action="append", default=[], metavar="[METHOD:]KEY=VALUE",
                   help="any setting a method declares (plug-ins included), by name: KEY=VALUE goes to the "
                        "methods that have KEY, METHOD:KEY=VALUE to that method only; VALUE is read as YAML "
                        "(3, 0.5, true, [1, 0.7071], text). Repeatable; the manifest's describe: {params: ...}")
    add_progress_flag(p)
    p.set_defaults(func=run)


def parse_param(text: str) -> tuple[str | None, str, object]:
    """`[METHOD:]KEY=VALUE` -> (method or None, key, value read as YAML)."""
    from mining.files.yamlfile import flag_value

    target, sep, raw = text.partition("=")
    method, _, key = target.rpartition(":")
    if not sep or not key.strip():
        raise UserError(f"--param {text!r}: expected KEY=VALUE or METHOD:KEY=VALUE")
    value = flag_value(raw, f"--param {text!r}: VALUE")
    if isinstance(value, dict):
        where = f"{method.strip() or 'METHOD'}: {{{key.strip()}: {raw.strip()}}}"
        raise UserError(f"--param {text!r}: VALUE must be a number, text, true/false or a list; a mapping goes in "
                        f"--params, e.g. --params '{{{where}}}'")
    return (method.strip() or None), key.strip(), value


def run(args: argparse.Namespace) -> int:
    from mining.compute.cluster import Cluster
    from mining.stages.describe.stage import run, split_params
    from mining.methods import method_class

    if args.workers < 0:
        raise UserError("--workers must be >= 0")
    scheduler, slurm = cluster_of(args)
    names = [m.strip() for m in args.method.split(",") if m.strip()]
    if not names:
        raise UserError("--method: no method given")
    if len(set(names)) < len(names):  # one store per method: a method twice would share one
        raise UserError("describe: each method needs its own --out store (--method names one twice)")
    params = {key: getattr(args, opt) for opt, key in _PARAMS.items() if getattr(args, opt) is not None}
    only: dict[str, dict[str, object]] = {}  # METHOD:KEY=VALUE settings
    for text in args.param:
        method, key, value = parse_param(text)
        if method is None:
            params[key] = value
        elif method not in names:
            raise UserError(f"--param {text!r}: {method} is not one of --method ({', '.join(names)})")
        else:
            only.setdefault(method, {})[key] = value
    d = options.from_args(args, "describe")
    per_method = split_params(names, params) if len(names) > 1 else [params]
    for name, settings in zip(names, per_method):
        # the manifest's settings of this method, under the flags; with --model the store's, but for
        # the paths of its files (a store names a model file by name and checksum: the path finds it)
        for key, value in d.params.get(name, {}).items():
            if args.model is None or key in method_class(name).files:
                settings.setdefault(key, value)
        settings.update(only.get(name, {}))
        method_class(name).check_params(settings)  # type and range of every value, before any work
        if not scheduler and not slurm:  # the workers run here: e.g. is the GPU asked for here?
            method_class(name).check_here(settings)
    infos = run(images=args.images, image_set=args.image_set, methods=names, out=args.out, models=args.model,
                shortlist=args.shortlist,
                options=replace(d, params=dict(zip(names, per_method))),
                cluster=Cluster(scheduler=scheduler, slurm=slurm, workers=args.workers),
                fit_images=args.fit_images, seed=args.seed, progress=not args.no_progress)
    for info in infos.values():
        print(json.dumps({k: info[k] for k in ("method", "set", "count", "failed", "dim", "shards")}))
    return 0
