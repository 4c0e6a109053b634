"""The benchmarks `mining evaluate --protocol` knows, one module each (names only: nothing is
imported until a protocol is used, so the CLI lists them cheaply).

A new benchmark is one module in this folder with `evaluate(gt, res, setups) -> dict` (the
report: variant, queries, metrics per row, optionally per_query) and one line in `REGISTRY`;
the CLI's `--protocol` choices come from here, `dispatch.evaluate_protocol` calls it.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from mining.errors import UserError

# protocol name -> "module:function"
REGISTRY: dict[str, str] = {
    "oxford": "mining.stages.evaluate.protocols.oxford:evaluate",
    "gldv2": "mining.stages.evaluate.protocols.gldv2:evaluate",
    "holidays": "mining.stages.evaluate.protocols.holidays:evaluate",
    "ukbench": "mining.stages.evaluate.protocols.ukbench:evaluate",
}


def protocol_names() -> list[str]:
    return list(REGISTRY)


def protocol_function(name: str) -> Callable[..., dict[str, Any]]:
    """The `evaluate` function of the protocol called `name` (imported now)."""
    if name not in REGISTRY:
        raise UserError(f"unknown protocol {name!r} (choose from {', '.join(REGISTRY)})")
    module, _, function = REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module), function)
