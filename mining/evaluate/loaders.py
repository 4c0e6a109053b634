"""Ground-truth loaders: revisitop's `gnd_*.pkl` and the older `.mat` form (1-based indices).

Why both: published results and older evaluation code ship the `.mat`; everything in this
package works on the pickle's 0-based form, so the `.mat` is converted once, here.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

from mining.errors import UserError

_INDEX_KEYS = ("easy", "hard", "junk", "ok")


def load_gnd(path: str | Path) -> dict[str, Any]:
    """{'imlist', 'qimlist', 'gnd'} with 0-based index lists, from a .pkl or a .mat file."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: ground truth not found")
    if p.suffix == ".mat":
        return _load_mat(p)
    try:
        with open(p, "rb") as f:
            data = pickle.load(f)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is the user's file
        raise UserError(f"{p}: not a readable gnd pickle ({exc})") from None
    _check(p, data)
    return data


def _check(p: Path, data: Any) -> None:
    if not isinstance(data, dict) or any(k not in data for k in ("imlist", "qimlist", "gnd")):
        raise UserError(f"{p}: expected keys imlist, qimlist and gnd (revisitop format)")
    if len(data["gnd"]) != len(data["qimlist"]):
        raise UserError(f"{p}: gnd has {len(data['gnd'])} entries but qimlist {len(data['qimlist'])}")


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
    gnd_raw = raw["gnd"].ravel()
    fields = gnd_raw.dtype.names or ()
    gnd = []
    for entry in gnd_raw:
        g: dict[str, Any] = {}
        for key in fields:
            val = np.asarray(entry[key]).ravel()
            if key in _INDEX_KEYS:
                idx = val.astype(np.int64) - 1  # 1-based in MATLAB
                if idx.size and idx.min() < 0:
                    raise UserError(f"{p}: gnd.{key} holds index 0 (the .mat form is 1-based)")
                g[key] = idx.tolist()
            elif key == "bbx":
                g[key] = val.astype(np.float64).tolist()
            else:
                g[key] = val.tolist()
        gnd.append(g)
    data = {"imlist": _names(raw["imlist"].ravel()), "qimlist": _names(raw["qimlist"].ravel()), "gnd": gnd}
    _check(p, data)
    return data
