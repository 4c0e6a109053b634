"""`mining evaluate --protocol`: a user's own results checked for what they must hold, then
scored by the protocol the registry names."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from mining.errors import UserError
from mining.stages.evaluate.protocols.readers import Results
from mining.stages.evaluate.protocols.registry import protocol_function
from mining.stages.evaluate.protocols.setups import SETUPS


def evaluate_protocol(protocol: str, gt: str | Path, res: Results, setups: Sequence[str] = SETUPS) -> dict[str, Any]:
    """One benchmark's metrics on a user's own results; JSON-ready (nan → None).

    setups: the revisited setups reported for a gnd ground truth (default Easy, Medium, Hard).
    """
    evaluate = protocol_function(protocol)
    gt = Path(gt)
    if not gt.exists():
        raise UserError(f"{gt}: ground truth not found")
    if res.ranks is not None and (res.queries is not None or res.database is not None):
        raise UserError("give --ranks or descriptors (--queries/--database), not both")
    if res.ranks is None and res.database is None:
        raise UserError("give --ranks (your rankings) or --database (and --queries) descriptors")
    if res.queries is not None and res.database is None:
        raise UserError("--queries needs --database (the database descriptors)")
    return {"protocol": protocol, "ground_truth": str(gt), **evaluate(gt, res, setups)}
