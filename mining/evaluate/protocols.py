"""Evaluation protocols (protocols.md): revisited setups, original Oxford, GLDv2, Holidays, UKBench.

Why here: each benchmark has its own ground-truth files and small rules (what is ignored,
what a missing query means); they all end in the same trapezoid AP from `metrics`.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from mining.errors import UserError
from mining.evaluate.metrics import compute_map

SETUPS = ("easy", "medium", "hard")
# setup -> (gnd keys that are positive, gnd keys that are ignored)
_SETUP_KEYS = {
    "easy": (("easy",), ("junk", "hard")),
    "medium": (("easy", "hard"), ("junk",)),
    "hard": (("hard",), ("junk", "easy")),
}


def _ints(g: Mapping[str, Any], keys: Iterable[str]) -> np.ndarray:
    parts = [np.asarray(g.get(k, []), dtype=np.int64).ravel() for k in keys]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def setup_gnd(gnd: Sequence[Mapping[str, Any]], setup: str) -> list[dict[str, np.ndarray]]:
    """revisitop's `{'ok', 'junk'}` per query for setup easy / medium / hard."""
    if setup not in _SETUP_KEYS:
        raise UserError(f"unknown setup {setup!r} (choose from {', '.join(SETUPS)})")
    pos_keys, junk_keys = _SETUP_KEYS[setup]
    return [{"ok": _ints(g, pos_keys), "junk": _ints(g, junk_keys)} for g in gnd]
