"""The describe stage: an image set -> a descriptor store, per method, sharded and resumable.

Image sets: `queries` (landmark query images cropped to their bbox; only the crop is
described), `database` (the landmark imlist), `candidates` (a download folder; the usable
images are those whose latest status row is `ok`). Methods that learn (whitening,
codebooks) learn on a seeded sample of *candidates* only and keep the state in the
candidates store (`model.npz`); landmark sets reuse it (`run`'s `models`), so nothing is ever
learned on the benchmark's own images.

Shards are independent Dask tasks (`mining.compute.cluster.run_tasks`); a shard is done when its
`.ids.parquet` exists (its payload and failure list are written before it), so an
interrupted run resumes where it stopped. An image that cannot be decoded is recorded in
`failures.parquet` and skipped.

The bytes of every output depend on the inputs and settings only, never on the worker
count, the shard size, the cluster or a resume: the learning sample is gathered in task
order, and the numeric kernels (torch, OpenCV, faiss) run single-threaded; parallelism
inside a task comes from describing several images at once. (PyTorch's CPU convolutions
give different bits with 1 and with 2+ intra-op threads: the last digits of cnn-gem's
vectors moved with the worker count.)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from mining import pins
from mining.files import atomic
from mining.retrieval import descriptors
from mining.photos import imageindex
from mining.compute.cluster import Cluster, available_cpus, connect, run_tasks
from mining.errors import UserError
from mining.photos.imagedecode import load_image  # the describe stage's decode (kept importable from here)
from mining.datasets.landmarks import load_landmarks
from mining.methods.base import Method, get_method, remade
from mining.settings.options import DescribeOptions
from mining.stages.describe.stores import (PLAN_FILE, RESUME_KEYS, Plan, check_resumable, failure_table, file_sha,
                                            finish, plan, sha)
from mining.files.tables import load_shortlist, read_file
from mining.compute.threads import in_order
from threadpoolctl import threadpool_limits

from mining.console.progress import bar as progress_bar

log = logging.getLogger(__name__)

SETS = ("queries", "database", "candidates")
PREFETCH = 4  # images decoded ahead of those being described (decode overlaps compute)
FIT_CHUNK = 50  # images per learning task (at most a shard)


@dataclass(frozen=True)
class ImageItem:
    """One image to describe: its store id, file, and the query bbox (x1, y1, x2, y2) if any."""

    id: str
    path: str
    bbox: tuple[float, float, float, float] | None = None


# ---- image sets ------------------------------------------------------------------------
def list_items(images: str | Path, image_set: str) -> list[ImageItem]:
    """The images of a set, in store order (qimlist / imlist order, or ascending photo id)."""
    if image_set not in SETS:
        raise UserError(f"--set must be one of {', '.join(SETS)}, not {image_set!r}")
    root = Path(images)
    if image_set == "candidates":
        return [ImageItem(str(pid), str(root / rel)) for pid, rel in imageindex.stored(root).items()]
    ds = load_landmarks(root)
    if image_set == "queries":
        return [ImageItem(q, str(ds.image_path(q)), ds.bbox(i)) for i, q in enumerate(ds.qimlist)]
    return [ImageItem(n, str(ds.image_path(n))) for n in ds.imlist]


def pin_numeric_threads() -> None:
    """One thread for this thread's numeric kernels (torch, OpenMP: faiss), whatever the CPU count.

    Called in every thread that describes: the bits of a description must not depend on how
    many threads the machine or the worker has. torch only where loaded: the ONNX Runtime
    methods never import it (cnn-gem's torch path pins it as it loads, `_build_backbone`)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    with contextlib.suppress(ImportError):
        import faiss

        faiss.omp_set_num_threads(1)


def single_threaded_numerics() -> Any:
    """Limit every BLAS and OpenMP pool loaded (numpy's, faiss's, torch's) to one thread.

    Used as a context manager around the stage (learning runs in this process), and left
    in place in worker processes. Measured on OpenBLAS: the PCA-whitening learned from the
    same rows differs in its last bits between 1 and 2+ BLAS threads. torch is not imported
    for it (see pin_numeric_threads)."""
    for lib in ("faiss", "cv2"):  # loaded first, or their pools escape the limit
        with contextlib.suppress(ImportError):
            __import__(lib)
    return threadpool_limits(limits=1)


Outcome = tuple[Any, "str | None"]  # (result, None) or (None, "Error: message")


def _once(cache: dict, key: Any, make: Callable[[], Any]) -> Outcome:
    """`make()` once per key and item; an exception is the item's recorded error (a UserError
    stops everything)."""
    if key not in cache:
        try:
            cache[key] = (make(), None)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - any undecodable file is recorded, never fatal
            cache[key] = (None, f"{type(exc).__name__}: {exc}")
    return cache[key]


def describe_item(item: ImageItem, methods: Sequence[Method], fns: Sequence[Callable[[Any], Any]]) -> list[Outcome]:
    """`fns[i](methods[i].extract(image))` for each method, with the image decoded once per
    (max_side, mode) and the features extracted once per shared `extractor()` key: the
    results (and error messages) are those of describing with each method on its own."""
    cache: dict = {}
    out: list[Outcome] = []
    for i, (m, fn) in enumerate(zip(methods, fns)):
        dk = (m.max_side, m.mode)
        key = m.extractor()
        ek = (dk, key) if key is not None else (dk, "own", i)
        img, err = _once(cache, ("decode", dk), lambda m=m: load_image(item.path, m.max_side, m.mode, item.bbox))
        if err is None:
            feats, err = _once(cache, ("extract", ek), lambda m=m, img=img: _read_only(m.extract(img)))
        if err is None:
            res, err = _once(cache, ("method", i), lambda fn=fn, feats=feats: fn(feats))
        if err is None:
            err = unusable(res)
        out.append((res, None) if err is None else (None, err))
    return out


def unusable(result: Any) -> str | None:
    """Why a description (or learning features) cannot be used: NaN or infinite values, or a
    global vector of zeros (no direction: every similarity 0); None when it can. A model that
    overflows or outputs NaN is caught here, per image, and counted by `finish`."""
    if any(a.dtype.kind == "f" and not np.isfinite(a).all() for a in _arrays(result)):
        return "Unusable: the descriptor has NaN or infinite values"
    if isinstance(result, np.ndarray) and result.dtype.kind == "f" and result.ndim == 1 and result.size \
            and not np.any(result):
        return "Unusable: the descriptor is all zeros"
    return None


def _arrays(x: Any, depth: int = 3) -> list[np.ndarray]:
    """The numpy arrays in a method's result (an array, tuples of them, a small record of them),
    `depth` levels down at most (a plug-in's payload may hold anything)."""
    if isinstance(x, np.ndarray):
        return [x]
    if depth == 0:
        return []
    if isinstance(x, (tuple, list)):
        return [a for v in x for a in _arrays(v, depth - 1)]
    return [a for v in vars(x).values() for a in _arrays(v, depth - 1)] if hasattr(x, "__dict__") else []


def _read_only(x: Any) -> Any:
    """Shared features must not be changed by the method that reads them first."""
    if isinstance(x, np.ndarray):
        x.flags.writeable = False
    return x


def iter_described(items: Sequence[ImageItem], methods: Sequence[Method], fns: Sequence[Callable[[Any], Any]],
                   threads: int = 1) -> Iterator[tuple[ImageItem, list[Outcome]]]:
    """(item, [(fns[i](...) or None, error or None) per method]) in item order.

    `threads` images are decoded and described at once, each with single-threaded numeric
    kernels, so the results are the same bits for any `threads`. An image that cannot be
    decoded or described gives its error instead (a UserError stops everything).
    """
    def job(it: ImageItem) -> list[Outcome]:
        pin_numeric_threads()
        return describe_item(it, methods, fns)

    threads = max(1, threads)
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="describe") as pool:
        yield from in_order(pool, job, items, threads + PREFETCH)


# ---- one shard (runs in a Dask worker) -------------------------------------------------
@lru_cache(maxsize=8)
def _cached_method(spec_json: str) -> Method:
    import cv2

    cv2.setNumThreads(1)  # see pin_numeric_threads; images are described in parallel instead
    pins.check("describe worker")  # a worker of one's own scheduler may run unpinned libraries
    single_threaded_numerics()  # in this worker process for good (restored in-process by describe)
    spec = json.loads(spec_json)
    with remade():  # the stage made it already and said what its settings deserve, once
        method = get_method(spec["method"], spec["params"], query=spec["query"])
    if spec.get("state"):
        with np.load(spec["state"]) as z:
            method.set_state({k: z[k] for k in z.files})
    return method


def _task_threads(spec: str) -> int:
    """Images described at once in this task: the spec's, or (on a cluster that is not ours)
    this machine's CPUs shared among the worker's task slots."""
    threads = int(json.loads(spec).get("threads") or 0)
    if threads:
        return threads
    try:
        from distributed import get_worker

        slots = int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):
        slots = 1
    return max(1, available_cpus() // max(1, slots))


def _from(base: str, items: list[ImageItem]) -> list[ImageItem]:
    """The items with their files found from `base`, the folder the stage was started in.

    A worker of a scheduler or a SLURM job may run in another folder: relative paths are
    read from the stage's folder there, while the outputs keep them as given (the same bytes
    whichever folder a run is made in)."""
    return [ImageItem(it.id, os.path.join(base, it.path), it.bbox) for it in items]


def describe_shard(outs: list[str], shard: str, items: list[ImageItem], specs: list[str], base: str = "") -> int:
    """Describe one shard with one or more methods (one decode and one shared extraction per
    image) and write it into each method's store (payload, failures, then the ids marker).
    Returns the number of images."""
    methods = [_cached_method(s) for s in specs]
    ids: list[list[str]] = [[] for _ in methods]
    payloads: list[list[Any]] = [[] for _ in methods]
    failures: list[list[dict[str, str]]] = [[] for _ in methods]
    given = {it.id: it.path for it in items}
    fns = [m.describe_extracted for m in methods]
    for item, results in iter_described(_from(base, items), methods, fns, _task_threads(specs[0])):
        for k, (payload, err) in enumerate(results):
            if err is None:
                payloads[k].append(payload)
                ids[k].append(item.id)
            else:
                failures[k].append({"id": item.id, "path": given[item.id], "error": err})
    for out, method, m_ids, m_payloads, m_failures in zip(outs, methods, ids, payloads, failures):
        out = os.path.join(base, out)
        shards = Path(out) / "shards"
        shards.mkdir(parents=True, exist_ok=True)
        atomic.write_parquet(shards / f"{shard}.failures.parquet", failure_table(m_failures))
        descriptors.write_shard(method, out, shard, m_ids, m_payloads)
    return len(items)


def fit_features_chunk(items: list[ImageItem], specs: list[str], base: str = "") -> list[list[np.ndarray | None]]:
    """Raw training features of a chunk of sample images for each method (one shared
    extraction per image), in item order (None: unusable image)."""
    methods = [_cached_method(s) for s in specs]
    fns = [m.fit_features_extracted for m in methods]
    return [[f for f, _ in results]
            for _, results in iter_described(_from(base, items), methods, fns, _task_threads(specs[0]))]


# ---- the stage -------------------------------------------------------------------------
FIT_IMAGES = 2000  # candidates sampled to learn a method's model (codebook, PCA)
FIT_SEED = 0  # seed of that sample and of k-means


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """What `mining describe` reads: an image set; a landmark set, the candidates stores it reuses."""

    images: str | Path  # a landmark dataset (gnd_*.pkl or its folder) or a download folder
    image_set: str  # one of SETS
    models: str | Path | None = None  # candidates stores ({method} as in out): learned state and settings to reuse
    shortlist: str | Path | None = None  # a cascade's shortlist.parquet: only the candidates it lists


@dataclass(frozen=True, kw_only=True)
class Sample:
    """The learning sample of methods that learn: how many candidates, and the seed of the draw and of k-means."""

    images: int = FIT_IMAGES
    seed: int = FIT_SEED


def run(*, inputs: Inputs, methods: Sequence[str], out: str | Path, options: DescribeOptions,
        cluster: Cluster = Cluster(workers=0), sample: Sample = Sample(),
        progress: bool = True) -> dict[str, dict[str, Any]]:
    """Describe an image set (`inputs`) with `methods` in one pass, each into its own store:
    `out` (with several methods, a path holding `{method}`, replaced by each one's name).
    `options.params[method]`: a method's settings (its defaults for those not given; the CLI's
    are merged by `mining.stages.describe.params`), `options.shard_size` images per shard.
    `cluster`: where the shards run (default in this process); `sample`: the learning sample
    of methods that learn.

    Each image is decoded once per (max_side, mode) and its features extracted once per
    shared `Method.extractor()` (rsift-asmk and rsift-vlad: one RootSIFT extraction), for
    learning and for describing; every store is the same bytes as that method's alone.
    Returns each method's store info (also its store.json), in method order."""
    if cluster.workers is not None and cluster.workers < 0:
        raise UserError("--workers must be >= 0")
    plans, items = _plans(inputs, methods, out, options, sample)
    # images described at once per task (0: decided on the worker, whose machine we do not know);
    # it changes the speed, never the bytes (see pin_numeric_threads)
    threads = 0 if (cluster.scheduler or cluster.slurm) else max(1, available_cpus() // max(1, cluster.workers or 0))
    for p in plans:
        p.out.mkdir(parents=True, exist_ok=True)
        # the settings to resume with: not store.json, which a workflow manager deletes (as the
        # output of an interrupted job) before it reruns the job
        atomic.write_json(p.out / PLAN_FILE, {k: p.info[k] for k in RESUME_KEYS})
    specs = _Specs(inputs.image_set == "queries", threads)
    with single_threaded_numerics(), connect(cluster) as client:
        _learn(client, [p for p in plans if p.learn and not p.state_path.is_file()], items, specs,
               min(FIT_CHUNK, options.shard_size), sample, progress)
        for p in plans:
            if p.state_path is not None:
                p.model_info = p.model_info or {"store": str(p.out.resolve()), "sha256": file_sha(p.state_path)}
        shards = [(f"{i // options.shard_size:05d}", items[i:i + options.shard_size])
                  for i in range(0, len(items), options.shard_size)]
        _describe(client, plans, shards, specs, f"{'+'.join(p.name for p in plans)}: describing {inputs.image_set}",
                  progress)
    return {p.name: finish(p, shards) for p in plans}


def _plans(inputs: Inputs, methods: Sequence[str], out: str | Path, options: DescribeOptions,
           sample: Sample) -> tuple[list[Plan], list[ImageItem]]:
    """Each method's plan, checked against its --model store and the store being resumed, and
    the set's images in store order (with a shortlist, those it lists)."""
    n = len(methods)
    if not n:
        raise UserError("describe: no method given")
    if len(set(methods)) < n:  # one store per method: a method twice would share one
        raise UserError("describe: each method needs its own --out store (--method names one twice)")
    model_paths = per_method_paths(inputs.models, methods, "--model")
    outs = [Path(o) for o in per_method_paths(out, methods, "--out")]
    if len({o.resolve() for o in outs}) != n:
        raise UserError("describe: each method needs its own --out store")
    if options.shard_size < 1:
        raise UserError("--shard-size must be at least 1")
    plans = [plan(m, inputs.images, inputs.image_set, o, options.params.get(m), mo, options.shard_size, sample.images,
                  sample.seed)
             for m, o, mo in zip(methods, outs, model_paths)]
    items = list_items(inputs.images, inputs.image_set)
    if not items:
        raise UserError(f"{inputs.images}: no images in set {inputs.image_set!r}")
    cascade = None
    if inputs.shortlist is not None:
        items, cascade = on_shortlist(items, inputs.image_set, Path(inputs.shortlist))
    ids_hash = sha("\n".join(i.id for i in items).encode())
    for p in plans:
        p.info["ids_sha256"] = ids_hash
        if cascade is not None:
            p.info["cascade"] = cascade
        check_resumable(p.out, p.info)
        if p.learn:  # a pool too small to whiten is known now, not after a learning pass
            p.info["small_pool"] = p.method.small_pool(min(sample.images, len(items)))
    return plans, items


def on_shortlist(items: list[ImageItem], image_set: str, shortlist: Path) -> tuple[list[ImageItem], dict[str, Any]]:
    """The candidates a cascade's shortlist lists (in store order), and what the store records
    of it: the file's checksum, how many it lists, how many were downloaded (described), of how many."""
    if image_set != "candidates":
        raise UserError(f"--shortlist is for --set candidates (the landmark sets are described in full), not {image_set!r}")
    ids, is_check = load_shortlist(shortlist)
    listed = set(ids.tolist())
    kept = [it for it in items if int(it.id) in listed]
    if len(kept) < 0.5 * ids.size:
        raise UserError(f"{shortlist}: only {len(kept)} of its {ids.size} photos are among these images: a shortlist "
                        "made for another run (make it again with `mining cascade shortlist`)")
    return kept, {"shortlist_sha256": file_sha(shortlist), "listed": int(ids.size), "check": int(is_check.sum()),
                  "described": len(kept), "of": len(items)}


@dataclass(frozen=True)
class _Specs:
    """What a worker needs to rebuild a method (`_cached_method`), as JSON."""

    query: bool
    threads: int

    def of(self, p: Plan, state: Path | None) -> str:
        return json.dumps({"method": p.name, "params": p.params, "query": self.query,
                           "state": str(state) if state else None, "threads": self.threads})


def _learn(client: Any, fitting: list[Plan], items: list[ImageItem], specs: _Specs, step: int, sample: Sample,
           progress: bool) -> None:
    """Learn each method's state on one seeded sample of the candidates (features extracted on
    the cluster, in task order) and write it to its model.npz."""
    sample_size = min(sample.images, len(items))
    for p in [p for p in fitting if p.info.get("small_pool")]:
        log.warning("%s: %s", p.name, p.info["small_pool"])  # once, before any image is read
    for p in [p for p in fitting if p.method.skip_learning(sample_size)]:
        p.method.set_state({})
        with atomic.atomic_path(p.state_path) as tmp:
            with open(tmp, "wb") as f:
                np.savez(f)
    fitting = [p for p in fitting if not p.method.skip_learning(sample_size)]
    if not fitting:
        return
    rng = np.random.default_rng(sample.seed)
    drawn = [items[i] for i in sorted(rng.choice(len(items), sample_size, replace=False))]
    chunks = [(drawn[i:i + step], [specs.of(p, None) for p in fitting], os.getcwd())
              for i in range(0, len(drawn), step)]
    bar = progress_bar(total=len(drawn), desc=f"{'+'.join(p.name for p in fitting)}: learning on candidates",
                       unit="img", disable=not progress)
    # task order, not completion order: the sample's order is part of what is learned
    results = run_tasks(client, fit_features_chunk, chunks, on_done=lambda r: bar.update(len(r)))
    bar.close()
    for k, p in enumerate(fitting):
        feats = [per_method[k] for chunk in results for per_method in chunk if per_method[k] is not None]
        try:
            if not feats:
                raise UserError(f"{p.name}: cannot learn the whitening or codebook: none of the {len(drawn)} sampled "
                                "images gave a usable descriptor (the model or its settings are the cause, not the "
                                "images); check them, or set whiten: false (--param whiten=false) where the method "
                                "whitens")
            # a small pool was said before the pass: the fit finds it again and says nothing
            with remade() if p.info.get("small_pool") else contextlib.nullcontext():
                state = p.method.fit(feats, seed=sample.seed)
        except UserError as exc:
            raise UserError(f"{p.out}: {exc}") from None
        with atomic.atomic_path(p.state_path) as tmp:
            with open(tmp, "wb") as f:
                np.savez(f, **state)


def _describe(client: Any, plans: list[Plan], shards: list[tuple[str, list[ImageItem]]], specs: _Specs,
              desc: str, progress: bool) -> None:
    """Describe the shards each store lacks (a shard is redone for those stores only)."""
    todo = []
    for name, chunk in shards:
        missing = [p for p in plans if not (p.out / "shards" / f"{name}.ids.parquet").is_file()]
        if missing:
            todo.append(([str(p.out) for p in missing], name, chunk, [specs.of(p, p.state_path) for p in missing],
                         os.getcwd()))
    total = sum(len(chunk) for _, chunk in shards)
    bar = progress_bar(total=total, initial=total - sum(len(t[2]) for t in todo), desc=desc, unit="img",
                       disable=not progress)
    run_tasks(client, describe_shard, todo, on_done=bar.update)
    bar.close()


def per_method_paths(template: str | Path | None, method_names: Sequence[str], what: str) -> list[str | None]:
    """`--out` / `--model` of each method: `{method}` in the path replaced by its name; with
    several methods the path must contain `{method}` (each method has its own store)."""
    if template is None:
        return [None] * len(method_names)
    template = str(template)
    if len(method_names) > 1 and "{method}" not in template:
        raise UserError(f"{what} {template!r}: with several methods it must contain {{method}}, "
                        f"e.g. DESC/{{method}}/candidates")
    return [template.replace("{method}", m) for m in method_names]


def read_failures(out: str | Path) -> list[dict[str, str]]:
    """Failure rows of a store (id, path, error)."""
    return read_file(Path(out) / "failures.parquet").to_pylist()


__all__ = ["ImageItem", "Inputs", "SETS", "Sample", "run", "describe_item", "describe_shard", "iter_described",
           "per_method_paths", "list_items", "load_image", "read_failures"]
