"""What `open_kit` checks before anything of a kit is read (the format: `mining.kit`,
docs/formats.md): a kit is a stranger's folder, and SHA256SUMS proves only that its files are
the ones listed, not that the list was made by `mining release --kit`.

- the tree: regular files and folders only (no symbolic link, to a file or a folder), plain
  names (`mining.files.plainpaths.check_tree`);
- kit.json: its methods and benchmarks are plain names (a name is a folder of the kit, never
  a path), each method's kind and dimension are what the reader expects;
- every store the kit says it has: store.json (method, kind, count, shards), exactly the
  shards `shards` names, their ids files' row counts adding up to `count`;
- every `.npy` (a global store's rows, the similarities) by its header alone, before a byte of
  data is allocated: no pickles or objects, the dtype and shape that kit.json and store.json
  say, and the file's size that the header implies; every `.npz` member likewise;
- distractors.parquet's columns and rows, and the evaluation.json fields the reader uses.

Anything else: one-line UserError naming the file and what is wrong with it.
"""

from __future__ import annotations

import json
import numbers
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mining.datasets.benchmarks import store_dir
from mining.files.names import DISTRACTORS, EVALUATION, STORE
from mining.retrieval.descriptors import GLOBAL
from mining.errors import UserError
from mining.files.npyfile import npy_header, npy_file
from mining.files.plainpaths import plain_name
from mining.retrieval.spatial import ROW_SUFFIX

GLOBAL_ROWS = np.dtype(np.float16)  # a global store's rows (mining.retrieval.descriptors)
SIMILARITY = np.dtype(np.float32)
TABLE_COLUMNS = ("rank", "photo_id", "path", "released")
_SETUPS = ("easy", "medium", "hard")
_METRICS = ("mAP", "mP@1", "mP@5", "mP@10")
_DEFLATE_MAX = 1032  # deflate's largest expansion: a member's bytes may claim at most this many times as many
DAMAGED = "; the kit was changed or damaged"


def _bad(path: Path | str, why: str, damaged: str = DAMAGED) -> UserError:
    return UserError(f"{path}: {why}{damaged}")


def _count(value: Any, path: Path, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise _bad(path, f"{key} must be a whole number ≥ 0, found {value!r}")
    return int(value)


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise _bad(path, "missing") from None
    except (OSError, ValueError) as exc:
        raise _bad(path, f"not readable as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _bad(path, "not a JSON object")
    return data


def check_npy(path: Path, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    """`path` holds exactly a C-order array of this dtype and shape."""
    got = npy_file(path, damaged=DAMAGED)
    if got != (dtype, shape):
        raise _bad(path, f"holds a {got[0]} array of shape {got[1]}, expected {dtype} {shape}")


def check_npz(path: Path) -> None:
    """Every member of an .npz a numeric .npy whose header matches its size (no pickle), a size the
    zip's bytes can hold (its own size fields are claims too: `_zip_sizes`)."""
    try:
        with zipfile.ZipFile(path) as z:
            _zip_sizes(path, z.infolist())
            for m in z.infolist():
                if not m.filename.endswith(".npy"):
                    raise _bad(path, f"member {m.filename!r} is not a .npy array")
                with z.open(m) as f:
                    npy_header(f, path / m.filename, m.file_size, DAMAGED)
    except FileNotFoundError:
        raise _bad(path, "missing") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise _bad(path, f"not a readable .npz ({exc})") from None


def _zip_sizes(path: Path, members: list[zipfile.ZipInfo]) -> None:
    """Each member's claimed size is one its bytes can hold: a stored member's is its bytes, a
    deflated one's at most `_DEFLATE_MAX` times them; and the members' bytes fit in the file."""
    for m in members:
        most = m.compress_size * (_DEFLATE_MAX if m.compress_type == zipfile.ZIP_DEFLATED else 1)
        if m.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise _bad(path / m.filename, f"compressed with method {m.compress_type} (numpy writes stored or "
                                          "deflated members)")
        if m.file_size > most or (m.compress_type == zipfile.ZIP_STORED and m.file_size != m.compress_size):
            raise _bad(path / m.filename, f"its zip entry claims {m.file_size:,} bytes but holds {m.compress_size:,} "
                                          "bytes" + (" (deflate expands at most 1032 times)" if most > m.compress_size
                                                     else ""))
    held = sum(m.compress_size for m in members)
    if held > path.stat().st_size:
        raise _bad(path, f"its zip entries claim {held:,} bytes but the file has {path.stat().st_size:,}")


def _rows(path: Path) -> int:
    """Rows of a store's ids file (column `id`, strings), from its footer."""
    try:
        meta = pq.read_metadata(path)
        schema = meta.schema.to_arrow_schema()
    except FileNotFoundError:
        raise _bad(path, "missing") from None
    except Exception as exc:  # noqa: BLE001 - any parquet reader failure is the file's
        raise _bad(path, f"not a readable Parquet file ({exc})") from None
    if schema.names != ["id"] or str(schema.field("id").type) not in ("string", "large_string"):
        raise _bad(path, f"its columns are {schema}, expected one string column `id`")
    return int(meta.num_rows)


def check_store(path: Path, method: str, kind: str, dim: int | None) -> int:
    """A kit store folder as kit.json describes it; returns its row count."""
    info = read_json(path / STORE)
    if info.get("method") != method or info.get("kind", GLOBAL) != kind:
        raise _bad(path / STORE, f"method {info.get('method')!r} of kind {info.get('kind')!r}, but kit.json "
                                         f"says {method!r} of kind {kind!r}")
    count, shards = (_count(info.get(k), path / STORE, k) for k in ("count", "shards"))
    names = [f"{i:05d}" for i in range(shards)]
    shard_dir = path / "shards"
    present = {p.name for p in shard_dir.iterdir()} if shard_dir.is_dir() else set()
    stray = sorted(n for n in present if n.split(".")[0] not in names or not n.split(".", 1)[1:])
    if stray:
        raise _bad(shard_dir / stray[0], f"not one of the {shards} shards {STORE} names")
    total = 0
    for name in names:
        rows = _rows(shard_dir / f"{name}.ids.parquet")
        total += rows
        if kind == GLOBAL:
            check_npy(shard_dir / f"{name}.npy", GLOBAL_ROWS, (rows, dim))
        elif not any(n.startswith(f"{name}.") and n != f"{name}.ids.parquet" for n in present):
            raise _bad(shard_dir / f"{name}.ids.parquet", "its shard's descriptors are missing")
    for npz in sorted(n for n in present if n.endswith(".npz")):
        check_npz(shard_dir / npz)
    if total != count:
        raise _bad(path / STORE, f"count is {count} but its shards hold {total} ids")
    return count


def check_kit(kit_json: Path, info: dict[str, Any]) -> None:
    """Everything `Kit` and `mining evaluate --kit` read, checked without reading any data
    (the tree itself: `check_tree`, before the checksums are read). `kit_json`: the kit's
    kit.json (`mining.kit.read.INFO`), `info` its content."""
    root = kit_json.parent
    methods = info.get("methods")
    if not isinstance(methods, dict) or not methods:
        raise _bad(kit_json, "`methods` must name the kit's methods")
    benchmarks = info.get("benchmarks")
    if benchmarks is not None and (not isinstance(benchmarks, list) or not benchmarks
                                   or len(set(map(str, benchmarks))) != len(benchmarks)):
        raise _bad(kit_json, f"`benchmarks` must be null or a list of distinct names, found {benchmarks!r}")
    for name in [*methods, *(benchmarks or [])]:
        if not plain_name(name):
            raise _bad(kit_json, f"{name!r} is not a plain name (a folder of the kit, never a path)")
    selection = _count((info.get("selection") or {}).get("distractors"), kit_json, "selection.distractors")
    for method, spec in methods.items():
        base = root / "methods" / method
        kind = spec.get("kind") if isinstance(spec, dict) else None
        dim = spec.get("dim") if isinstance(spec, dict) else None
        if not isinstance(kind, str) or (kind == GLOBAL and (_count(dim, kit_json, f"{method}.dim") == 0)):
            raise _bad(kit_json, f"method {method!r} needs its kind (and a dimension ≥ 1 when global)")
        n_dis = check_store(base / "distractors", method, kind, dim)
        if (base / "distractors" / "model.npz").exists():
            check_npz(base / "distractors" / "model.npz")
        for bench in benchmarks or [None]:
            folder = store_dir(base, bench)
            n_q, n_db = (check_store(folder / part, method, kind, dim) for part in ("queries", "database"))
            check_npy(folder / "similarities" / "landmarks.npy", SIMILARITY, (n_q, n_db))
            check_npy(folder / "similarities" / "distractors.npy", SIMILARITY, (n_q, n_dis))
            sp = spec.get("spatial") if isinstance(spec, dict) else None
            if sp is not None and not (isinstance(sp, dict) and set(sp) == {"top_k", "min_inliers"}
                                       and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                                               for v in sp.values())):
                raise _bad(kit_json, f"method {method!r}: spatial must be null or {{top_k, min_inliers}}, found {sp!r}")
            if sp is not None:  # the +SP rows' similarities
                check_npy(folder / "similarities+SP" / "landmarks.npy", SIMILARITY, (n_q, n_db))
                check_npy(folder / "similarities+SP" / "distractors.npy", SIMILARITY, (n_q, n_dis))
    check_table(root / DISTRACTORS, selection)
    check_evaluation(root / EVALUATION, list(methods), benchmarks)


def check_table(path: Path, rows: int) -> None:
    try:
        meta = pq.read_metadata(path)
        names = meta.schema.to_arrow_schema().names
    except FileNotFoundError:
        raise _bad(path, "missing") from None
    except Exception as exc:  # noqa: BLE001 - any parquet reader failure is the file's
        raise _bad(path, f"not a readable Parquet file ({exc})") from None
    if sorted(names) != sorted(TABLE_COLUMNS) or meta.num_rows != rows:
        raise _bad(path, f"{meta.num_rows} rows with columns {', '.join(names)}; kit.json says {rows} rows of "
                         f"{', '.join(TABLE_COLUMNS)}")
    schema = meta.schema.to_arrow_schema()
    want = {"rank": pa.types.is_integer, "photo_id": pa.types.is_integer, "path": pa.types.is_string,
            "released": pa.types.is_boolean}
    wrong = [c for c, ok in want.items() if not ok(schema.field(c).type)]
    if wrong:
        raise _bad(path, f"column {wrong[0]} is {schema.field(wrong[0]).type}")


def check_evaluation(path: Path, methods: list[str], benchmarks: list[str] | None) -> None:
    """The fields of the run's evaluation.json that `mining evaluate --kit` reads."""
    doc = read_json(path)
    if benchmarks is None:
        runs = {"": doc}
    else:
        per = doc.get("per_benchmark")
        if not isinstance(per, dict) or sorted(per) != sorted(benchmarks):
            raise _bad(path, f"per_benchmark must hold the kit's benchmarks {', '.join(benchmarks)}")
        runs = {f"per_benchmark.{b}.": per[b] for b in benchmarks}
    for where, ev in runs.items():
        if not isinstance(ev, dict):
            raise _bad(path, f"{where or 'the document'} must be an object")
        _count(ev.get("n"), path, f"{where}n")
        if not isinstance((ev.get("landmarks") or {}).get("fingerprint"), str):
            raise _bad(path, f"{where}landmarks.fingerprint must be a string")
        setups = ev.get("setups")
        if not isinstance(setups, list) or not setups or any(s not in _SETUPS for s in setups):
            raise _bad(path, f"{where}setups must be a list of {', '.join(_SETUPS)}, found {setups!r}")
        run_methods = ev.get("methods")
        rows = set(methods) | {m + ROW_SUFFIX for m in methods}  # +SP rows: the run's, which the kit cannot redo
        if not isinstance(run_methods, list) or any(not isinstance(m, str) or m not in rows for m in run_methods):
            raise _bad(path, f"{where}methods must list methods of the kit ({', '.join(methods)}) or their "
                             f"{ROW_SUFFIX} rows, found {run_methods!r}")
        results = ev.get("results") if isinstance(ev.get("results"), dict) else {}
        if run_methods:  # the curve's sizes: the first method's, first setup's
            _check_numbers(path, ev, ("curve", run_methods[0], setups[0], "sizes"), where, whole=True)
        for m in [m for m in methods if m in results]:  # what the comparison with the run reads
            for s in setups:
                _check_numbers(path, ev, ("curve", m, s, "mined"), where)
                for kind in ("none", "mined"):
                    for metric in _METRICS:
                        _check_numbers(path, ev, ("results", m, s, kind, metric), where)


def _check_numbers(path: Path, ev: dict[str, Any], keys: tuple[str, ...], where: str, whole: bool = False) -> None:
    """ev[keys...] is a number, or a list of them (`whole`: of whole numbers ≥ 0)."""
    value: Any = ev
    for k in keys:
        value = value.get(k) if isinstance(value, dict) else None
    items = value if isinstance(value, list) else [value]
    if value is None or not all(_number(v) and (not whole or (isinstance(v, int) and v >= 0)) for v in items):
        what = "whole numbers ≥ 0" if whole else "a number" if not isinstance(value, list) else "numbers"
        raise _bad(path, f"{where}{'.'.join(keys)} must be {what}, found {str(value)[:80]}")


def _number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float))
