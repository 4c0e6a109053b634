"""The describe stage: an image set -> a descriptor store, per method, sharded and resumable.

Image sets: `queries` (landmark query images cropped to their bbox; only the crop is
described), `database` (the landmark imlist), `candidates` (a download folder; the usable
images are those whose latest status row is `ok`). Methods that learn (whitening,
codebooks) learn on a seeded sample of *candidates* only and keep the state in the
candidates store (`model.npz`); landmark sets reuse it (`Inputs.models`), so nothing is ever
learned on the benchmark's own images.

Shards are independent Dask tasks (`mining.cluster.run_tasks`); a shard is done when its
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
import hashlib
import json
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mining import atomic, descriptors, imageindex
from mining.cluster import available_cpus, connect, run_tasks
from mining.errors import UserError
from mining.imagedecode import load_image  # the describe stage's decode (kept importable from here)
from mining.landmarks import load_landmarks
from mining.methods.base import GLOBAL, Method, get_method, method_class
from mining.options import DescribeOptions
from mining.tables import read_file
from mining.threads import in_order
from threadpoolctl import threadpool_limits

from mining.progress import bar as progress_bar

log = logging.getLogger(__name__)

SETS = ("queries", "database", "candidates")
MODEL_FILE = descriptors.MODEL_FILE
PLAN_FILE = "describe.json"  # the settings of a store being written; a resume must match them
RESUME_KEYS = ("method", "set", "params", "shard_size", "ids_sha256", "fit_images", "seed")
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
        out.append((res, None) if err is None else (None, err))
    return out


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
    single_threaded_numerics()  # in this worker process for good (restored in-process by describe)
    spec = json.loads(spec_json)
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
        atomic.write_parquet(shards / f"{shard}.failures.parquet", _failure_table(m_failures))
        descriptors.write_shard(method, out, shard, m_ids, m_payloads)
    return len(items)


def fit_features_chunk(items: list[ImageItem], specs: list[str], base: str = "") -> list[list[np.ndarray | None]]:
    """Raw training features of a chunk of sample images for each method (one shared
    extraction per image), in item order (None: unusable image)."""
    methods = [_cached_method(s) for s in specs]
    fns = [m.fit_features_extracted for m in methods]
    return [[f for f, _ in results]
            for _, results in iter_described(_from(base, items), methods, fns, _task_threads(specs[0]))]


def _failure_table(rows: list[dict[str, str]]) -> pa.Table:
    cols = ("id", "path", "error")
    return pa.table({c: pa.array([r[c] for r in rows], pa.string()) for c in cols})


# ---- the stage -------------------------------------------------------------------------
def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _file_sha(path: Path) -> str:
    return _sha(path.read_bytes())


@dataclass
class _Plan:
    """One method's part of a describe run: its store, settings and learned state."""

    name: str
    out: Path
    method: Method
    params: dict[str, Any]
    info: dict[str, Any]
    state_path: Path | None
    model_info: dict[str, Any] | None
    learn: bool  # learns on this run's candidates (no --model)


def _plan(method_name: str, images: str | Path, image_set: str, out: Path, params: dict[str, Any] | None,
          model: str | Path | None, shard_size: int, fit_images: int, seed: int) -> _Plan:
    """A method's settings, checked against its --model store (not yet against the store
    being resumed: that needs the image list's hash)."""
    params = {k: v for k, v in (params or {}).items() if v is not None}
    state_path: Path | None = None
    model_info: dict[str, Any] | None = None
    if model is not None:
        mstore = descriptors.open_store(model)
        if mstore.method != method_name:
            raise UserError(f"--model {model} is a {mstore.method!r} store, not {method_name!r}")
        base = dict(mstore.info.get("params", {}))
        clash = {k: v for k, v in params.items() if k in base and base[k] != v}
        if clash:
            raise UserError(f"options {sorted(clash)} differ from the --model store's; landmark sets must be "
                            "described with the candidates' settings")
        params = {**params, **base}  # a setting newer than the store (e.g. cnn-gem backend) can be given
        if (Path(model) / MODEL_FILE).is_file():
            state_path = (Path(model) / MODEL_FILE).resolve()
            model_info = {"store": str(Path(model).resolve()), "sha256": _file_sha(state_path)}
    for key in method_class(method_name).missing(params):
        raise UserError(f"method {method_name}: the setting {key} must be given (--param {method_name}:{key}=... "
                        "or the manifest's describe: params)")
    method = get_method(method_name, params, query=image_set == "queries")
    params = method.params  # defaults filled in: recorded, and reused by landmark sets
    if method.learns and state_path is None:
        if image_set != "candidates":
            raise UserError(f"method {method_name} learns on candidates: describe the candidates first and pass "
                            "--model CANDIDATE_STORE (learning on the landmark dataset is forbidden)")
        state_path = (out / MODEL_FILE).resolve()
    info: dict[str, Any] = {
        "method": method_name, "kind": method.kind, "set": image_set, "params": params,
        "shard_size": shard_size, "images": str(Path(images).resolve()), "ids_sha256": None,
        "fit_images": fit_images if method.learns and model is None else None, "seed": seed,
    }
    if image_set != "candidates":
        info["landmarks_fingerprint"] = load_landmarks(images).fingerprint()
    return _Plan(method_name, out, method, params, info, state_path, model_info, method.learns and model is None)


@dataclass(frozen=True)
class Inputs:
    """What `mining describe` reads: one image set, and the stores whose learned state and
    settings landmark sets reuse."""

    images: str | Path  # a landmark dataset (gnd_*.pkl or its folder) or a download folder
    image_set: str  # queries, database or candidates (SETS)
    models: Mapping[str, str | Path] = field(default_factory=dict)  # method -> its candidates store


FIT_IMAGES = 2000  # candidates sampled to learn a method's model (codebook, PCA)
FIT_SEED = 0  # seed of that sample and of k-means


def run(inputs: Inputs, out: Mapping[str, str | Path], options: DescribeOptions, *, workers: int = 0,
        scheduler: str | None = None, slurm: str | None = None, fit_images: int = FIT_IMAGES, seed: int = FIT_SEED,
        progress: bool = True) -> dict[str, dict[str, Any]]:
    """Describe an image set with the methods of `out` (method -> its store folder, in that
    order) in one pass, into one store each; `options.params[method]`: a method's settings
    (its defaults for those not given), `options.shard_size` images per shard.

    Each image is decoded once per (max_side, mode) and its features extracted once per
    shared `Method.extractor()` (rsift-asmk and rsift-vlad: one RootSIFT extraction), for
    learning and for describing; every store is the same bytes as that method's alone.
    Returns each method's store info (also its store.json), in method order."""
    method_names = list(out)
    images, image_set, shard_size = inputs.images, inputs.image_set, options.shard_size
    outs = [out[m] for m in method_names]
    params = [options.params.get(m) for m in method_names]
    unknown = sorted(set(inputs.models) - set(method_names))
    if unknown:
        raise UserError(f"describe: a --model store for {', '.join(unknown)}, which is not described here")
    models = [inputs.models.get(m) for m in method_names]
    n = len(method_names)
    if not n:
        raise UserError("describe: no method given")
    outs = [Path(o) for o in outs]
    if len({o.resolve() for o in outs}) != n:
        raise UserError("describe: each method needs its own --out store")
    if shard_size < 1:
        raise UserError("--shard-size must be at least 1")
    plans = [_plan(m, images, image_set, o, p, mo, shard_size, fit_images, seed)
             for m, o, p, mo in zip(method_names, outs, params, models)]
    items = list_items(images, image_set)
    if not items:
        raise UserError(f"{images}: no images in set {image_set!r}")
    ids_hash = _sha("\n".join(i.id for i in items).encode())
    for p in plans:
        p.info["ids_sha256"] = ids_hash
        _check_resumable(p.out, p.info)
    # images described at once per task (0: decided on the worker, whose machine we do not know);
    # it changes the speed, never the bytes (see pin_numeric_threads)
    threads = 0 if (scheduler or slurm) else max(1, available_cpus() // max(1, workers))
    for p in plans:
        p.out.mkdir(parents=True, exist_ok=True)
        # the settings to resume with: not store.json, which a workflow manager deletes (as the
        # output of an interrupted job) before it reruns the job
        atomic.write_json(p.out / PLAN_FILE, {k: p.info[k] for k in RESUME_KEYS})
    names = "+".join(method_names)

    def spec(p: _Plan, state: Path | None) -> str:
        return json.dumps({"method": p.name, "params": p.params, "query": image_set == "queries",
                           "state": str(state) if state else None, "threads": threads})

    with single_threaded_numerics(), connect(scheduler, workers, slurm) as client:
        fitting = [p for p in plans if p.learn and not p.state_path.is_file()]
        if fitting:
            specs = [spec(p, None) for p in fitting]
            rng = np.random.default_rng(seed)
            sample = [items[i] for i in sorted(rng.choice(len(items), min(fit_images, len(items)), replace=False))]
            step = min(FIT_CHUNK, shard_size)
            chunks = [(sample[i:i + step], specs, os.getcwd()) for i in range(0, len(sample), step)]
            bar = progress_bar(total=len(sample), desc=f"{'+'.join(p.name for p in fitting)}: learning on candidates",
                               unit="img", disable=not progress)
            # task order, not completion order: the sample's order is part of what is learned
            results = run_tasks(client, fit_features_chunk, chunks, on_done=lambda r: bar.update(len(r)))
            bar.close()
            for k, p in enumerate(fitting):
                feats = [per_method[k] for chunk in results for per_method in chunk if per_method[k] is not None]
                state = p.method.fit(feats, seed=seed)
                with atomic.atomic_path(p.state_path) as tmp:
                    with open(tmp, "wb") as f:
                        np.savez(f, **state)
            del results
        for p in plans:
            if p.state_path is not None:
                p.model_info = p.model_info or {"store": str(p.out.resolve()), "sha256": _file_sha(p.state_path)}
        shards = [(f"{i // shard_size:05d}", items[i:i + shard_size]) for i in range(0, len(items), shard_size)]
        todo = []
        for name, chunk in shards:  # a shard is redone for the stores that lack it, and only them
            missing = [p for p in plans if not (p.out / "shards" / f"{name}.ids.parquet").is_file()]
            if missing:
                todo.append(([str(p.out) for p in missing], name, chunk, [spec(p, p.state_path) for p in missing],
                             os.getcwd()))
        bar = progress_bar(total=len(items), initial=len(items) - sum(len(t[2]) for t in todo),
                           desc=f"{names}: describing {image_set}", unit="img", disable=not progress)
        run_tasks(client, describe_shard, todo, on_done=bar.update)
        bar.close()

    return {p.name: _finish(p, shards) for p in plans}


def shared_groups(method_names: Sequence[str], params: dict[str, dict[str, Any]] | None = None) -> list[list[str]]:
    """The methods grouped by what one pass can share: the same decode (max_side, mode) and
    the same `extractor()` (with their settings; default settings when not given). Methods
    without an extractor are alone. Order: the methods' own, groups by their first member."""
    groups: dict[Any, list[str]] = {}
    for i, name in enumerate(method_names):
        m = get_method(name, (params or {}).get(name))
        key = m.extractor()
        groups.setdefault((m.max_side, m.mode, key) if key is not None else ("alone", i), []).append(name)
    return list(groups.values())


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


def split_params(method_names: Sequence[str], params: dict[str, Any]) -> list[dict[str, Any]]:
    """Each method's share of the given settings (those it has); a setting that none of the
    methods has is an error, as it is for one method."""
    known = [set(get_method(m).defaults) for m in method_names]
    unused = sorted(k for k in params if not any(k in kn for kn in known))
    if unused:
        raise UserError(f"method(s) {', '.join(method_names)}: unknown parameter(s) {unused}")
    return [{k: v for k, v in params.items() if k in kn} for kn in known]


def _finish(p: _Plan, shards: list[tuple[str, list[ImageItem]]]) -> dict[str, Any]:
    """Gather a method's failures and write its store.json (the store is complete)."""
    out, info, method = p.out, dict(p.info), p.method
    failures = [read_file(out / "shards" / f"{name}.failures.parquet") for name, _ in shards]
    failed = pa.concat_tables(failures) if failures else _failure_table([])
    atomic.write_parquet(out / "failures.parquet", failed)
    count = len(descriptors.Store(out, info).ids())
    dim = method.dim()
    if method.kind == GLOBAL and shards:
        dim = int(np.load(out / "shards" / f"{shards[0][0]}.npy", mmap_mode="r").shape[1])
    info.update({"model": p.model_info, "count": count, "failed": failed.num_rows, "dim": dim,
                 "shards": len(shards), "complete": True})
    descriptors.write_store_info(out, info)
    if failed.num_rows:
        log.warning("%d image(s) could not be described; see %s", failed.num_rows, out / "failures.parquet")
    return info


def _check_resumable(out: Path, info: dict[str, Any]) -> None:
    """Refuse to resume into a store made with other settings (its shards would not match)."""
    meta = next((m for m in (out / PLAN_FILE, out / "store.json") if m.is_file()), None)
    if meta is None:
        if (out / "shards").is_dir() and any((out / "shards").iterdir()):
            raise UserError(f"{out}: has shards but no {PLAN_FILE}; delete it or choose another --out")
        return
    old = json.loads(meta.read_text())
    diff = [k for k in RESUME_KEYS if json.dumps(old.get(k), sort_keys=True) != json.dumps(info.get(k), sort_keys=True)]
    if diff:
        was, now = old.get("params") or {}, info.get("params") or {}
        keys = sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k)) if "params" in diff else []
        what = ", ".join(f"params ({', '.join(keys)})" if k == "params" and keys else k for k in diff)
        raise UserError(f"{out}: existing store was made with different {what}; delete it or choose another --out")


def read_failures(out: str | Path) -> list[dict[str, str]]:
    """Failure rows of a store (id, path, error)."""
    return read_file(Path(out) / "failures.parquet").to_pylist()


__all__ = ["ImageItem", "Inputs", "SETS", "run", "describe_item", "describe_shard", "iter_described",
           "per_method_paths", "shared_groups", "split_params", "list_items", "load_image", "read_failures"]
