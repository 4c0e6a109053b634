"""Each method's store in a describe run: its plan (the settings, checked against its --model
store and against the store being resumed, and where its learned state is) and, once every
shard is written, its failures and store.json (the store is complete)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from mining import pins
from mining.files.npyfile import npy_file
from mining.files import atomic
from mining.files.names import STORE
from mining.retrieval import descriptors
from mining.errors import UserError
from mining.datasets.landmarks import load_landmarks
from mining.methods.base import GLOBAL, Method, get_method, method_class
from mining.files.tables import read_file
from mining.photos.imagedecode import load_image

log = logging.getLogger("mining.stages.describe.stage")  # the stage's name in the run's logs

MODEL_FILE = descriptors.MODEL_FILE
PLAN_FILE = "describe.json"  # the settings of a store being written; a resume must match them
RESUME_KEYS = ("method", "set", "params", "shard_size", "ids_sha256", "fit_images", "seed", "pins")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def file_sha(path: Path) -> str:
    return sha(path.read_bytes())


@dataclass
class Plan:
    """One method's part of a describe run: its store, settings and learned state."""

    name: str
    out: Path
    method: Method
    params: dict[str, Any]
    info: dict[str, Any]
    state_path: Path | None
    model_info: dict[str, Any] | None
    learn: bool  # learns on this run's candidates (no --model)


def plan(method_name: str, images: str | Path, image_set: str, out: Path, params: dict[str, Any] | None,
          model: str | Path | None, shard_size: int, fit_images: int, seed: int) -> Plan:
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
        # a model file is recorded by name and checksum: the path given here finds it (the checksum decides)
        files = method_class(method_name).files
        clash = {k: v for k, v in params.items() if k in base and k not in files and base[k] != v}
        if clash:
            raise UserError(f"options {sorted(clash)} differ from the --model store's; landmark sets must be "
                            "described with the candidates' settings")
        # a setting newer than the store (e.g. cnn-gem backend) can be given
        params = {**params, **{k: v for k, v in base.items() if not (k in files and params.get(k))}}
        if (Path(model) / MODEL_FILE).is_file():
            state_path = (Path(model) / MODEL_FILE).resolve()
            model_info = {"store": str(Path(model).resolve()), "sha256": file_sha(state_path)}
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
        "method": method_name, "kind": method.kind, "set": image_set, "params": method.recorded_params(),
        "shard_size": shard_size, "images": str(Path(images).resolve()), "ids_sha256": None,
        "fit_images": fit_images if method.learns and model is None else None, "seed": seed,
        "pins": pins.fingerprint(),  # the lock and the SIMD level: a store is not resumed across them
    }
    if image_set != "candidates":
        info["landmarks_fingerprint"] = load_landmarks(images).fingerprint()
    return Plan(method_name, out, method, params, info, state_path, model_info, method.learns and model is None)


def finish(p: Plan, shards: list[tuple[str, list[Any]]]) -> dict[str, Any]:
    """Gather a method's failures and write its store.json (the store is complete)."""
    failures = [read_file(p.out / "shards" / f"{name}.failures.parquet") for name, _ in shards]
    failed = pa.concat_tables(failures) if failures else failure_table([])
    atomic.write_parquet(p.out / "failures.parquet", failed)
    info = dict(p.info)
    count = len(descriptors.Store(p.out, info).ids())
    refuse_mostly_failed(p.name, p.out, count, failed, None if count else failing_model(p.method, failed))
    dim = p.method.dim()
    if p.method.kind == GLOBAL and shards:
        first = p.out / "shards" / f"{shards[0][0]}.npy"
        _, shape = npy_file(first, damaged=descriptors.DAMAGED)  # by its header, checked against its size
        if len(shape) != 2:
            raise UserError(f"{first}: holds a {len(shape)}-D array, not one row per image{descriptors.DAMAGED}")
        dim = shape[1]
    info.update({"model": p.model_info, "count": count, "failed": failed.num_rows, "dim": dim,
                 "shards": len(shards), "complete": True})
    descriptors.write_store_info(p.out, info)
    if failed.num_rows:
        log.warning("%d image(s) could not be described; see %s", failed.num_rows, p.out / "failures.parquet")
    return info


def refuse_mostly_failed(method: str, out: Path, count: int, failed: pa.Table, model: str | None = None) -> None:
    """Stop when most images failed: then the method, its model or its settings are the cause, not
    the images (a NaN model, an overflowing GeM), and a store of the few that passed would be a
    silent wrong answer. `model`: the model file that failed on every image (`failing_model`),
    named as the cause with its first error. The failures stay in failures.parquet; store.json
    is not written."""
    if failed.num_rows <= count:
        return
    errors = Counter(str(e).split(":", 1)[-1].strip() or str(e) for e in failed.column("error").to_pylist())
    top, n = errors.most_common(1)[0]
    total = f"{method}: {failed.num_rows} of {failed.num_rows + count} images could not be described"
    where = f"(every failure: {out / 'failures.parquet'})"
    if model is not None:
        raise UserError(f"{total}, each by its model {model} (the first error: {str(failed.column('error')[0])[:200]}), "
                        f"and the images decode: the model (with these settings) is the cause, not the images; check "
                        f"it, or export it again {where}")
    raise UserError(f"{total} ({n} of them: {top[:200]}); when most images fail, the method, its model or its settings "
                    f"are the cause, not the images: check them {where}")


def failing_model(method: Method, failed: pa.Table) -> str | None:
    """The method's model file (`Method.files`) when the first image it failed on decodes: then
    the model failed on a good image. None without a model file or failure, or when the image
    does not decode (the images may be the cause)."""
    model = next((str(method.params[k]) for k in method.files if method.params.get(k)), None)
    if model is None or not failed.num_rows:
        return None
    try:
        load_image(str(failed.column("path")[0]), method.max_side, method.mode)
    except Exception:  # noqa: BLE001 - any decode failure: the image's, maybe
        return None
    return model


def check_resumable(out: Path, info: dict[str, Any]) -> None:
    """Refuse to resume into a store made with other settings (its shards would not match)."""
    meta = next((m for m in (out / PLAN_FILE, out / STORE) if m.is_file()), None)
    if meta is None:
        if (out / "shards").is_dir() and any((out / "shards").iterdir()):
            raise UserError(f"{out}: has shards but no {PLAN_FILE}; delete it or choose another --out")
        return
    old = json.loads(meta.read_text())
    diff = [k for k in RESUME_KEYS if json.dumps(old.get(k), sort_keys=True) != json.dumps(info.get(k), sort_keys=True)]
    if diff:
        was, now = old.get("params") or {}, info.get("params") or {}
        keys = sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k)) if "params" in diff else []
        what = ", ".join(f"params ({', '.join(keys)})" if k == "params" and keys else
                         "libraries or SIMD level (pins: requirements.lock, mining/pins.py)" if k == "pins" else k
                         for k in diff)
        raise UserError(f"{out}: existing store was made with different {what}; delete it or choose another --out")


def failure_table(rows: list[dict[str, str]]) -> pa.Table:
    cols = ("id", "path", "error")
    return pa.table({c: pa.array([r[c] for r in rows], pa.string()) for c in cols})
