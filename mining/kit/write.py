"""Writing the evaluation kit (`mining release --kit`; the format: `mining.kit`, docs/formats.md).

What it copies is what the run's evaluation read: each method's query and database stores as
they are (shard files byte for byte), and the rows of its candidates store that hold the
selected distractors, with the model the method learned on the candidates. Same inputs give
the same bytes (rows in store order, fixed shard size, sorted checksums).
"""

from __future__ import annotations

import json
import shutil
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from mining.files import atomic, checksums
from mining.datasets.benchmarks import store_dir
from mining.files.names import DISTRACTORS, EVALUATION, STORE
from mining.retrieval.descriptors import (
    GLOBAL,
    MODEL_FILE,
    iter_similarities,
    open_store,
    similarity_function,
    write_global_shard,
    write_ids,
    write_store_info,
)
from mining.errors import UserError
from mining.kit.read import FORMAT, INFO, METHODS, SIMS, SIMS_SP, TABLE, VERSION
from mining.publishing.text import md_text
from mining.publishing.version import code_version
from mining.retrieval.methodstores import open_method, parse_ids
from mining.retrieval.reranking import verified_candidates, verified_landmark

SHARD_ROWS = 10_000  # distractors per shard of a kit's store
# the libraries a method's descriptors depend on (those installed are recorded in kit.json)
LIBRARIES = ("numpy", "torch", "torchvision", "onnxruntime", "opencv-python", "opencv-python-headless",
             "opencv-contrib-python-headless", "asmk", "faiss-cpu", "Pillow", "distractor-mining")
# what a kit's store.json keeps of the run's (no absolute paths of the machine that made it)
_STORE_KEYS = ("method", "kind", "set", "params", "dim", "seed", "fit_images", "landmarks_fingerprint")


def library_versions() -> dict[str, str]:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def _store_info(info: dict[str, Any], count: int, shards: int) -> dict[str, Any]:
    out = {k: info[k] for k in _STORE_KEYS if k in info}
    model = info.get("model")
    out.update({"model": {"sha256": model["sha256"]} if model else None, "count": count, "shards": shards,
                "complete": True})
    return out


def _copy_store(src: Any, dst: Path) -> None:
    """A landmark store, shard files copied as they are (failure lists and resume files left out)."""
    names = src.shard_names()
    (dst / "shards").mkdir(parents=True)
    for shard in names:
        for f in sorted((src.path / "shards").glob(f"{shard}.*")):
            if not f.name.endswith(".failures.parquet") and not f.name.endswith(".ids.parquet"):
                shutil.copyfile(f, dst / "shards" / f.name)
        shutil.copyfile(src.path / "shards" / f"{shard}.ids.parquet", dst / "shards" / f"{shard}.ids.parquet")
    write_store_info(dst, _store_info(src.info, len(src.ids()), len(names)))


# long: one pass over the candidate store, each shard read once for its rows and similarities (13 lines: why)
def _subset_store(src: Any, dst: Path, wanted: np.ndarray, shard_rows: int,
                  queries: dict[str | None, Any]) -> tuple[int, dict[str | None, np.ndarray]]:
    """The rows of the candidates store `src` whose photo id is in `wanted` (sorted), in store
    order, as a store of their own; the method's model beside them. Returns the rows kept and,
    per benchmark (`queries`: its query store), the float32 similarities of its queries to
    them, in the kit's row order: the bits the run's evaluation ranked by.

    Why those bits without computing the whole pool: a global method's similarities are
    computed on the run's own shards (same shapes, same GEMM), and only shards holding a
    selected row are read; a method of another kind scores each (query, image) pair on its own
    (ASMK sums a pair's word matches in the same order whatever else is in the block), so its
    are computed on the kept rows alone, from the kit's store."""
    method = None if src.kind == GLOBAL else src.method_impl()
    glob = {b: (q.load_all()[1], similarity_function(q, src)) for b, q in queries.items()} if method is None else {}
    cols: dict[str | None, list[np.ndarray]] = {b: [] for b in queries}
    ids: list[str] = []
    rows: list[Any] = []
    names: list[str] = []

    def flush(k: int) -> None:
        """The first k rows kept so far as the next shard."""
        name = f"{len(names):05d}"
        if method is None:
            dim = int(src.info.get("dim", 0))
            write_global_shard(dst, name, ids[:k], np.stack(rows[:k]) if k else np.zeros((0, dim), np.float16))
        else:
            (dst / "shards").mkdir(parents=True, exist_ok=True)
            method.write_payloads(dst / "shards", name, rows[:k])
            write_ids(dst, name, ids[:k])
        names.append(name)
        del ids[:k], rows[:k]

    kept = 0
    for shard in src.shard_names():
        block_ids = src.shard_ids(shard)
        photo = parse_ids(block_ids, str(src.path))
        take = np.flatnonzero(np.isin(photo, wanted))
        if not take.size:  # neither rows nor similarities wanted: the payload is not even read
            continue
        payload = src.load_payload(shard)
        ids.extend(block_ids[i] for i in take)
        if method is None:
            rows.extend(np.asarray(payload)[take])  # float16 rows, as stored
            for b, (q, sim) in glob.items():  # the whole shard, as evaluate computes it: the same bits
                cols[b].append(np.asarray(sim(q, payload), np.float32)[:, take])
        else:
            try:
                rows.extend(method.take_rows(payload, take))
            except NotImplementedError:
                raise UserError(f"method {src.method!r} (store kind {src.kind!r}) cannot go into a kit: its plug-in "
                                "has no `take_rows`") from None
        kept += take.size
        while len(ids) >= shard_rows:
            flush(shard_rows)
    if ids or not names:
        flush(len(ids))
    if (src.path / MODEL_FILE).is_file():
        shutil.copyfile(src.path / MODEL_FILE, dst / MODEL_FILE)
    write_store_info(dst, _store_info(src.info, kept, len(names)))
    if method is not None:
        kept_store = open_store(dst, src.method_of)
        cols = {b: [sims for _, sims in iter_similarities(q, kept_store)] for b, q in queries.items()}
    return kept, {b: np.concatenate(c, axis=1) if c else np.zeros((len(queries[b].ids()), 0), np.float32)
                  for b, c in cols.items()}


def _landmark_sims(queries: Any, database: Any) -> np.ndarray:
    """Queries × database (store orders), float32, as evaluate computes them."""
    blocks = [sims for _, sims in iter_similarities(queries, database)]
    return np.concatenate(blocks, axis=1) if blocks else np.zeros((len(queries.ids()), 0), np.float32)


def _spatial_sims(out: Path, stores: Any, landmarks: np.ndarray, wanted: np.ndarray) -> None:
    """SIMS_SP/: the +SP similarities the run's evaluation ranked its `<method>+SP` rows by
    (`mining.retrieval.reranking`: each query's shortlist of the database and of the whole pool
    verified, the verified entries lifted), in the same shapes and orders as SIMS/. What +SP needs
    beyond the descriptors (keypoints of the whole pool, for the shortlist) stays out of the kit.
    `landmarks`: the plain queries × database similarities (SIMS/landmarks.npy)."""
    landmarks = verified_landmark(stores.queries, stores.database, stores.queries.ids(), stores.database.ids(),
                                  landmarks, stores.spatial)
    cols = [sims[:, np.isin(parse_ids(ids, str(stores.path)), wanted)]
            for ids, sims in verified_candidates(stores.queries, stores.candidates, stores.spatial)]
    _save_sims(out, landmarks, np.concatenate(cols, axis=1) if cols else np.zeros((landmarks.shape[0], 0), np.float32))


def _save_sims(out: Path, landmarks: np.ndarray, distractors: np.ndarray) -> None:
    out.mkdir(parents=True)
    for name, arr in (("landmarks", landmarks), ("distractors", distractors)):
        with atomic.atomic_path(out / f"{name}.npy") as tmp, open(tmp, "wb") as f:
            np.save(f, np.ascontiguousarray(arr, np.float32))


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _timeless(value: Any) -> Any:
    """`value` without its `seconds` entries, at any depth (each benchmark's report has its own)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "seconds"}
    return [_timeless(v) for v in value] if isinstance(value, list) else value


def _method_entry(cand: Any, base: Path, run: dict[str | None, Any], kept: int, wanted: int) -> dict[str, Any]:
    """A method's entry in the kit's info: what it is, how many distractors it holds, and the
    bytes of its part of the kit (`base`), apart by what grows with the set and what does not."""
    spatial = {b: st for b, st in run.items() if st.spatial is not None}
    model = cand.info.get("model")
    model_file = base / "distractors" / MODEL_FILE
    model_bytes = model_file.stat().st_size if model_file.is_file() else 0
    sims_bytes = sum((store_dir(base, b) / SIMS / "distractors.npy").stat().st_size for b in run)
    sp_bytes = sum(_tree_bytes(store_dir(base, b) / SIMS_SP) for b in spatial)
    dist_bytes = _tree_bytes(base / "distractors") - model_bytes  # what grows with the set
    landmark_bytes = _tree_bytes(base) - dist_bytes - model_bytes - sims_bytes - sp_bytes
    return {
        "kind": cand.kind, "dim": cand.info.get("dim"), "params": cand.info.get("params"),
        "model_sha256": model["sha256"] if model else None, "distractors": kept,
        "missing": int(wanted - kept),  # selected photos this method could not describe
        "bytes": {"landmarks": landmark_bytes, "distractors": dist_bytes, "model": model_bytes,
                  "similarities": sims_bytes, "similarities_sp": sp_bytes},
        # +SP rows reproduced from the run's verified similarities (SIMS_SP), when it had them
        "spatial": next(iter(spatial.values())).spatial if spatial else None,
        # what grows with the set: its descriptors, and the run's similarities of every query to it
        "bytes_per_distractor": round((dist_bytes + sims_bytes) / kept, 1) if kept else None,
        "gb_per_million": round((dist_bytes + sims_bytes) / kept * 1e6 / 1e9, 3) if kept else None,
    }


def write_kit(out: Path, method_dirs: Sequence[Path], selection: Any, evaluation: dict[str, Any] | None,
              shard_rows: int = SHARD_ROWS, method_of: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Write the kit into `out` (a new folder). `selection`: rank, photo_id, path, released
    (every selected photo, released or not: the set the run evaluated); `evaluation`: the
    run's evaluation.json; `method_of`: what reads a non-global method's payloads
    (`mining.retrieval.descriptors.Store`). Returns what the dataset card says about the kit (sizes)."""
    if evaluation is None:
        raise UserError(f"--kit needs the run's evaluation (--evaluation {EVALUATION}): the kit reproduces its table")
    if not method_dirs:
        raise UserError("--kit needs the descriptors (--descriptors DESC/<method> ...)")
    several = evaluation.get("per_benchmark")
    benchmarks = sorted(several) if several else None
    wanted = np.unique(selection["photo_id"].to_numpy(np.int64))
    methods: dict[str, Any] = {}
    for d in method_dirs:
        cand = open_store(Path(d) / "candidates", method_of)
        name = cand.method
        if name in methods:
            raise UserError(f"method {name!r} given twice (--descriptors {d})")
        base = out / METHODS / name
        for bench in benchmarks or [None]:
            for part in ("queries", "database"):
                _copy_store(open_store(store_dir(d, bench) / part), store_dir(base, bench) / part)
        # spatial=None: the +SP settings where the stores keep keypoints
        run = {b: open_method(d, benchmark=b, spatial=None, method_of=method_of) for b in benchmarks or [None]}
        kept, sims = _subset_store(cand, base / "distractors", wanted, shard_rows, {b: r.queries for b, r in run.items()})
        for bench, stores in run.items():  # SIMS/: queries × database, and × the kit's distractors
            landmarks = _landmark_sims(stores.queries, stores.database)
            _save_sims(store_dir(base, bench) / SIMS, landmarks, sims[bench])
            if stores.spatial is not None:  # the +SP rows' similarities (the kit holds no keypoints)
                _spatial_sims(store_dir(base, bench) / SIMS_SP, stores, landmarks, wanted)
        methods[name] = _method_entry(cand, base, run, kept, int(wanted.size))
    if several:
        fps = {b: several[b]["landmarks"]["fingerprint"] for b in benchmarks}
    else:
        fps = {evaluation["landmarks"]["name"]: evaluation["landmarks"]["fingerprint"]}
    info = {"format": FORMAT, "version": VERSION, "code": code_version(), "libraries": library_versions(),
            "benchmarks": benchmarks, "landmarks_fingerprints": fps,
            "selection": {"distractors": int(len(selection)), "released": int(np.sum(selection["released"]))},
            "methods": methods}
    atomic.write_json(out / INFO, info)
    # the run's table without its timing (`seconds`), so that a kit is the same bytes on every rerun
    atomic.write_text(out / EVALUATION, json.dumps(_timeless(evaluation), indent=2, sort_keys=True) + "\n")
    table = pa.table({"rank": pa.array(selection["rank"].to_numpy(np.int64)),
                      "photo_id": pa.array(selection["photo_id"].to_numpy(np.int64)),
                      "path": pa.array([str(p) for p in selection["path"]], pa.string()),
                      "released": pa.array(selection["released"].to_numpy(bool))})
    atomic.write_parquet(out / TABLE, table)
    atomic.write_text(out / "README.md", readme(info))
    atomic.write_text(out / checksums.SUMS, checksums.sha256sums(out))
    return {"methods": {m: {k: v[k] for k in ("distractors", "bytes", "bytes_per_distractor", "gb_per_million")}
                        for m, v in methods.items()}, "bytes": _tree_bytes(out)}


# the settings that say which network a method ran: a file by name and checksum, a built-in by name
MODEL_KEYS = ("model", "model_sha256", "model_file", "backbone", "onnx_sha256")


def model_lines(methods: dict[str, Any]) -> str:
    """Which model file (name and sha256 prefix) or built-in network each method ran: the file
    with that checksum, and only it, reproduces the kit's descriptors (`mining describe` checks it)."""
    rows = []
    for m, v in methods.items():
        got = {k: (v.get("params") or {}).get(k) for k in MODEL_KEYS}
        said = ", ".join(f"{k} {md_text(x)}" for k, x in got.items() if x)  # a file's name is anyone's text
        if said:
            rows.append(f"- {md_text(m)}: {said}")
    if not rows:
        return ""
    return ("Models (a file is named by its name and checksum; describing your queries with it, give its path with "
            "`--param M:model=PATH` and the checksum is checked):\n\n" + "\n".join(rows) + "\n")


def readme(info: dict[str, Any]) -> str:
    """KIT/README.md: what the kit is and the three ways to use it."""
    sel = info["selection"]
    rows = "\n".join(f"| {m} | {v['kind']} | {v['distractors']} | {v['bytes_per_distractor']} | {v['gb_per_million']} |"
                     for m, v in info["methods"].items())
    models = model_lines(info["methods"])
    return f"""# Evaluation kit

The descriptors of the {sel['distractors']} selected distractors ({sel['released']} of them released as images),
of the landmark queries and of the landmark database, for each method, exactly as the run evaluated
them: evaluate against the set without downloading an image.

| method | kind | distractors | bytes per distractor | GB per million distractors |
|---|---|---|---|---|
{rows}

{models}
- Check it: `sha256sum -c SHA256SUMS` (the tools below check it before reading).
- Reproduce the run's table (`{EVALUATION}`: none and mined rows of every method, +SP, +αQE and +DBA):
  `mining evaluate --kit . --landmarks gnd_<name>.pkl`
- Your own queries, described with a method of the kit and its model:
  `mining describe --method M --images LANDMARKS --set queries --model methods/M/distractors --out Q` then
  `mining evaluate --kit . --landmarks LANDMARKS/gnd_<name>.pkl --queries Q`
  (global methods also take a `.npy`, one row per query of the gnd, with `--method M`).
- In Python: `from mining.kit import open_kit` (`kit.vectors`, `kit.stores`, `kit.model`, `kit.distractors`).

Format: `kit.json` (settings, versions, sizes), `{EVALUATION}`, `{DISTRACTORS}` (rank, photo_id,
path, released), `methods/<method>/{{queries,database,distractors}}/` (descriptor stores: `{STORE}`,
`shards/NNNNN.ids.parquet` + `NNNNN.npy` float16 rows or `NNNNN.asmk.npz` codes; `model.npz` beside the
distractors when the method learned one), `methods/<method>/similarities/` (the run's float32 similarities of
the queries to the database and to the distractors), `SHA256SUMS`. Reference: docs/formats.md of distractor-mining.
"""
