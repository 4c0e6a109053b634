"""Reading a landmark ground-truth file: revisitop's gnd pickle, or the older 1-based .mat.

An untrusted gnd pickle never runs code and never chooses its own memory.

A pickle is a small program; the file, not the reader, decides which constructors it calls and
with what arguments. `read_gnd_pickle` runs it with Python's own (pure-Python) unpickler,
restricted to what a gnd file holds — containers, strings, numbers, bytes, numpy arrays, dtypes
and scalars — and bounded:

- the file is at most `MAX_FILE_BYTES` and is read whole first, so a length field in the
  pickle (BINUNICODE8, BYTES8) cannot ask for more than the file holds;
- a constructor is never given a size: `bytes(n)`/`bytearray(n)` are refused, an array is
  made empty and filled by its state, and that state (shape, dtype, data) is checked before
  numpy sees it: the data must hold exactly shape × itemsize bytes (or, for object arrays,
  one value per element), and no array may be larger than the file itself;
- dtypes are the plain ones (bool, integers, floats, complex, object, fixed-width strings no
  wider than the file).

Anything else is one `UserError` naming the file.
"""

from __future__ import annotations

import codecs
import collections
import io
import math
import pickle
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mining.errors import UserError

INDEX_KEYS = ("easy", "hard", "junk", "ok")  # the gnd keys that hold database indices
POSITIVE_KEYS = ("easy", "hard", "ok")  # revisited protocol: easy ∪ hard; original protocol: ok

# revisitop's gnd_roxford5k.pkl is 0.5 MB; a gnd for a million-image database is tens of MB
MAX_FILE_BYTES = 256 << 20
_NUMPY_CORE = {("multiarray", "_reconstruct"), ("multiarray", "scalar"), ("numeric", "_frombuffer")}
_PLAIN_DTYPE = {"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16", "O8"}
_KINDS = set("biufcOUS")


def read_gnd(p: Path) -> Any:
    """The raw gnd structure of a .pkl (`read_gnd_pickle`) or 1-based .mat file (made 0-based), unvalidated."""
    if not p.is_file():
        raise UserError(f"{p}: landmark ground truth not found")
    if p.suffix == ".mat":
        return _load_mat(p)
    return read_gnd_pickle(p)


def read_gnd_pickle(p: Path) -> Any:
    """The object a gnd pickle holds; UserError for anything a landmark file never holds."""
    size = p.stat().st_size
    if size > MAX_FILE_BYTES:
        raise UserError(f"refusing to load {p}: {size} bytes, more than a landmark file holds "
                        f"(at most {MAX_FILE_BYTES >> 20} MiB)")
    with open(p, "rb") as f:
        raw = f.read(MAX_FILE_BYTES + 1)
    try:
        return _GndUnpickler(io.BytesIO(raw), p, max(len(raw), 1 << 16)).load()
    except UserError:
        raise
    except RecursionError:
        raise UserError(f"{p}: not a readable gnd pickle (nested too deeply)") from None
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is the user's file
        raise UserError(f"{p}: not a readable gnd pickle ({exc})") from None


class _GndUnpickler(pickle._Unpickler):  # type: ignore[name-defined,misc]  # the Python one: BUILD can be checked
    dispatch = dict(pickle._Unpickler.dispatch)  # type: ignore[attr-defined]

    def __init__(self, f: io.BytesIO, path: Path, limit: int) -> None:
        super().__init__(f)
        self.path, self.limit = path, limit

    def refuse(self, what: str) -> UserError:
        return UserError(f"refusing to load {self.path}: {what}, which a landmark file never holds")

    def find_class(self, module: str, name: str) -> Any:
        if module in ("builtins", "__builtin__"):
            if name in ("set", "frozenset", "complex"):
                return getattr(__import__("builtins"), name)
            if name in ("bytes", "bytearray"):
                return self._sized(getattr(__import__("builtins"), name))
        if (module, name) == ("_codecs", "encode"):  # how protocols 0-2 store bytes
            return self._encode
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module == "numpy" and name == "dtype":
            return self._dtype
        if module == "numpy" and name == "ndarray":
            return np.ndarray  # only as _reconstruct's argument (see _reconstruct)
        sub = module.split(".", 2)
        if len(sub) == 3 and sub[:2] in (["numpy", "core"], ["numpy", "_core"]) and (sub[2], name) in _NUMPY_CORE:
            return getattr(self, name)
        raise self.refuse(f"it asks for {module}.{name}")

    # ---- the constructors a gnd file may call, with their arguments checked --------------

    def _sized(self, kind: type) -> Any:
        def make(*args: Any) -> Any:
            if args and not isinstance(args[0], (str, bytes, bytearray)):
                raise self.refuse(f"it asks for {kind.__name__}({type(args[0]).__name__})")
            return kind(*args)
        return make

    def _encode(self, obj: Any, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        if not isinstance(obj, str) or codecs.lookup(encoding).name not in ("latin-1", "iso8859-1", "utf-8"):
            raise self.refuse(f"it asks for _codecs.encode({type(obj).__name__}, {encoding!r})")
        return codecs.encode(obj, encoding, errors)

    def _dtype(self, spec: Any, align: bool = False, copy: bool = False) -> np.dtype:
        if not isinstance(spec, str) or not (spec in _PLAIN_DTYPE or (spec[:1] in "US" and spec[1:].isdigit())):
            raise self.refuse(f"it asks for numpy dtype {spec!r}")
        return self._check_dtype(np.dtype(spec, align=False, copy=True))  # a copy: BUILD sets its state

    def _check_dtype(self, dt: Any) -> np.dtype:
        if (not isinstance(dt, np.dtype) or dt.kind not in _KINDS or dt.fields or dt.subdtype
                or dt.itemsize > self.limit):
            raise self.refuse(f"it asks for numpy dtype {dt!r}")
        return dt

    def _reconstruct(self, cls: Any, shape: Any, dtype: Any) -> np.ndarray:
        if cls is not np.ndarray or tuple(shape) != (0,):
            raise self.refuse(f"it asks for a numpy array made as {cls!r}, shape {shape!r}")
        return np.ndarray((0,), np.uint8)  # filled by BUILD, once its state is checked

    def scalar(self, dtype: Any, data: Any = None) -> Any:
        dt = self._check_dtype(dtype)
        if dt.kind == "O" or not isinstance(data, bytes) or len(data) != dt.itemsize:
            raise self.refuse(f"it asks for a numpy scalar of {dt} from {type(data).__name__}")
        return np.frombuffer(data, dt)[0]

    def _frombuffer(self, buf: Any, dtype: Any, shape: Any, order: str) -> np.ndarray:
        dt = self._check_dtype(dtype)
        n = self._elements(shape)
        if dt.kind == "O" or not isinstance(buf, (bytes, bytearray)) or len(buf) != n * dt.itemsize:
            raise self.refuse(f"it asks for a numpy array of shape {shape!r} from a buffer of another size")
        return np.frombuffer(buf, dt).reshape(shape, order=order if order in ("C", "F") else "C").copy()

    def _elements(self, shape: Any) -> int:
        if not isinstance(shape, tuple) or not all(isinstance(d, int) and 0 <= d <= self.limit for d in shape):
            raise self.refuse(f"it asks for a numpy array of shape {shape!r}")
        n = math.prod(shape)
        if n > self.limit:
            raise self.refuse(f"it asks for a numpy array of {n} elements from a {self.limit}-byte file")
        return n

    def _array_state(self, state: Any) -> None:
        """Refuse an ndarray state numpy would allocate for, or crash on, before numpy sees it."""
        if not (isinstance(state, tuple) and len(state) == 5 and isinstance(state[3], bool)):
            raise self.refuse("it holds a numpy array state of an unknown form")
        _, shape, dt, _, data = state
        n = self._elements(shape)
        dt = self._check_dtype(dt)
        if n * dt.itemsize > self.limit:
            raise self.refuse(f"it asks for a numpy array of {n * dt.itemsize} bytes from a {self.limit}-byte file")
        if dt.kind == "O":
            ok = isinstance(data, list) and len(data) == n
        else:
            ok = isinstance(data, (bytes, bytearray)) and len(data) == n * dt.itemsize
        if not ok:
            raise self.refuse(f"it holds a numpy array of shape {shape} whose data does not fill it")

    def load_build(self) -> None:
        state = self.stack[-1]
        inst = self.stack[-2]
        if isinstance(inst, np.dtype):
            # numpy's own state for this dtype, only the byte order taken from the file: a
            # state of the file's making (flags, sizes) can crash numpy
            self.stack.pop()
            own = inst.__reduce__()[2]
            order = state[1] if isinstance(state, tuple) and len(state) > 1 else None
            if order in ("<", ">") and own[1] in ("<", ">"):
                own = (own[0], order, *own[2:])
            inst.__setstate__(own)
            return
        if isinstance(inst, np.ndarray):
            self._array_state(state)
        else:
            raise self.refuse(f"it sets the state of a {type(inst).__name__}")
        super().load_build()

    dispatch[pickle.BUILD[0]] = load_build


def gnd_entry(qimlist: Sequence[Any], i: int) -> str:
    """How a message names gnd entry i: its query name when the file has one."""
    name = qimlist[i] if i < len(qimlist) else None
    return f"query {str(name)!r} (#{i})" if name is not None else f"gnd entry #{i}"


def positive_set(g: dict[str, Any]) -> set[int]:
    """The database indices gnd entry `g` counts as its query's positives (`POSITIVE_KEYS`)."""
    return {int(v) for k in POSITIVE_KEYS for v in np.asarray(g.get(k, []), dtype=object).ravel()}


def _names(arr: Any) -> list[str]:
    return [str(np.asarray(x).ravel()[0]) if np.asarray(x).size else "" for x in np.atleast_1d(np.asarray(arr, dtype=object))]


def _load_mat(p: Path) -> dict[str, Any]:
    from scipy.io import loadmat

    try:
        raw = loadmat(str(p), squeeze_me=False, struct_as_record=True)
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"{p}: not a readable .mat file ({exc})") from None
    for key in ("imlist", "qimlist", "gnd"):
        if key not in raw:
            raise UserError(f"{p}: missing variable {key!r} (expected revisitop's gnd .mat)")
    qimlist = _names(raw["qimlist"].ravel())
    gnd_raw = raw["gnd"].ravel()
    fields = gnd_raw.dtype.names or ()
    gnd = []
    for i, entry in enumerate(gnd_raw):
        g: dict[str, Any] = {}
        for key in fields:
            val = np.asarray(entry[key]).ravel()
            if key in INDEX_KEYS:
                try:
                    idx = val.astype(np.int64) - 1  # 1-based in MATLAB
                except (TypeError, ValueError):
                    raise UserError(f"{p}: {gnd_entry(qimlist, i)}: gnd.{key} must hold integer indices") from None
                if idx.size and idx.min() < 0:
                    raise UserError(f"{p}: {gnd_entry(qimlist, i)}: gnd.{key} holds index {idx.min() + 1} "
                                    "(the .mat form is 1-based)")
                g[key] = idx.tolist()
            elif key == "landmark":
                g[key] = str(val[0]) if val.size else None
            else:
                g[key] = val.tolist()
        gnd.append(g)
    return {"imlist": _names(raw["imlist"].ravel()), "qimlist": qimlist, "gnd": gnd}
