"""The benchmarks `mining evaluate --protocol` knows, one module each, and the dispatch to them.

A new benchmark is one module in this folder with `evaluate(gt, res, setups) -> dict` (the
report: variant, queries, metrics per row, optionally per_query) and one line in `REGISTRY`;
the CLI's `--protocol` choices come from here.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Sequence

from mining.errors import UserError
from mining.evaluate.protocols.readers import Results
from mining.evaluate.protocols.setups import SETUPS

# protocol name -> "module:function" (imported when the protocol is used)
REGISTRY: dict[str, str] = {
    "oxford": "mining.evaluate.protocols.oxford:evaluate",
    "gldv2": "mining.evaluate.protocols.gldv2:evaluate",
    "holidays": "mining.evaluate.protocols.holidays:evaluate",
    "ukbench": "mining.evaluate.protocols.ukbench:evaluate",
}
PROTOCOLS = tuple(REGISTRY)


def protocol_names() -> list[str]:
    return list(REGISTRY)


def evaluate_protocol(protocol: str, gt: str | Path, res: Results, setups: Sequence[str] = SETUPS) -> dict[str, Any]:
    """One benchmark's metrics on a user's own results; JSON-ready (nan → None).

    setups: the revisited setups reported for a gnd ground truth (default Easy, Medium, Hard).
    """
    if protocol not in REGISTRY:
        raise UserError(f"unknown protocol {protocol!r} (choose from {', '.join(PROTOCOLS)})")
    gt = Path(gt)
    if not gt.exists():
        raise UserError(f"{gt}: ground truth not found")
    if res.ranks is not None and (res.queries is not None or res.database is not None):
        raise UserError("give --ranks or descriptors (--queries/--database), not both")
    if res.ranks is None and res.database is None:
        raise UserError("give --ranks (your rankings) or --database (and --queries) descriptors")
    if res.queries is not None and res.database is None:
        raise UserError("--queries needs --database (the database descriptors)")
    module, _, function = REGISTRY[protocol].partition(":")
    evaluate = getattr(importlib.import_module(module), function)
    return {"protocol": protocol, "ground_truth": str(gt), **evaluate(gt, res, setups)}
