"""Revisited Oxford/Paris setups (protocols.md): which ground-truth keys are positive and which
are ignored in Easy, Medium and Hard, and the mP@k cut-offs reported with them."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from mining.errors import UserError


SETUPS = ("easy", "medium", "hard")


# setup -> (gnd keys that are positive, gnd keys that are ignored)
_SETUP_KEYS = {
    "easy": (("easy",), ("junk", "hard")),
    "medium": (("easy", "hard"), ("junk",)),
    "hard": (("hard",), ("junk", "easy")),
}
KAPPAS = (1, 5, 10)


def _ints(g: Mapping[str, Any], keys: Iterable[str]) -> np.ndarray:
    parts = [np.asarray(g.get(k, []), dtype=np.int64).ravel() for k in keys]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def setup_gnd(gnd: Sequence[Mapping[str, Any]], setup: str) -> list[dict[str, np.ndarray]]:
    """revisitop's `{'ok', 'junk'}` per query for setup easy / medium / hard."""
    if setup not in _SETUP_KEYS:
        raise UserError(f"unknown setup {setup!r} (choose from {', '.join(SETUPS)})")
    pos_keys, junk_keys = _SETUP_KEYS[setup]
    return [{"ok": _ints(g, pos_keys), "junk": _ints(g, junk_keys)} for g in gnd]
