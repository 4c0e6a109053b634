"""`select: {n: auto}`: the distractor count N chosen from the mined mAP-vs-N curve.

Why: R1M kept a million because a million was the goal, not because the evidence said so.
The mined set is hard because its first images are the hardest; past some N, adding more
barely lowers mAP any further. The rule: the smallest N of a geometric grid (and every larger
grid point) at which, for every method and every setup, the mined N's mAP is within a stated
fraction of the mAP with all candidates: `mAP_mined(N) ≤ (1 + tolerance) · mAP_all`
(tolerance 0.05 by default: manifest `select.auto_tolerance`). The ranking is exactly the one
`mining select` takes its top N from (`mining.stages.select.stage.ranked`: confirmed landmarks out,
near-duplicate and leak-risk rules applied), handed in by the CLI (`mining select --n auto`
ranks, then calls this; neither stage imports the other), and the curve is exact (this
package's experiment, which never ranks the distractors). The report shows the curves, the
line and N.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mining.files import atomic
from mining.errors import UserError
from mining.stages.evaluate.experiment import evaluate_setups, setup_base
from mining.stages.evaluate.histograms import Ranking, load_method
from mining.stages.evaluate.protocols.setups import setup_gnd
from mining.datasets.landmarks import load_landmarks

GRID_POINTS = 24


def grid(total: int, points: int = GRID_POINTS) -> list[int]:
    """Geometric sizes from 1 to `total` (both included)."""
    if total < 1:
        return [0]
    return sorted({int(round(v)) for v in np.geomspace(1, total, points)} | {1, total})


def choose(curves: dict[str, dict[str, dict[str, Any]]], sizes: Sequence[int], tolerance: float) -> dict[str, Any]:
    """N from curves[method][setup] = {"mined": [mAP per size], "all": mAP}: the smallest size at
    which every curve is within the tolerance, and stays so at every larger size."""
    ok = np.ones(len(sizes), bool)
    first_ok: dict[str, dict[str, int | None]] = {}
    for m, per in curves.items():
        first_ok[m] = {}
        for s, c in per.items():
            mined = np.array(c["mined"], dtype=np.float64)
            good = mined <= (1 + tolerance) * c["all"] + 1e-12
            stays = np.flip(np.logical_and.accumulate(np.flip(good)))  # good here and at every larger size
            first_ok[m][s] = int(sizes[int(np.argmax(stays))]) if stays.any() else None
            ok &= stays
    n = int(sizes[int(np.argmax(ok))]) if ok.any() else int(sizes[-1])
    binding = [(m, s) for m in first_ok for s in first_ok[m] if first_ok[m][s] == n]
    return {"n": n, "first_ok": first_ok, "binding": [f"{m}/{s}" for m, s in binding]}


def check_args(tolerance: float, descriptors: Sequence[Path], setups: Sequence[str]) -> None:
    """The cheap checks, before select ranks anything."""
    if not 0 <= tolerance < 1:
        raise UserError(f"auto tolerance must be in [0, 1), not {tolerance}")
    if not descriptors:
        raise UserError("give at least one --descriptors DESC/<method> folder")
    for s in setups:
        setup_gnd([], s)


def run_choose_n(*, landmarks: Path, descriptors: Sequence[Path], ranked_ids: np.ndarray, out: Path,
                 tolerance: float, setups: Sequence[str]) -> dict[str, Any]:
    """`mining select --n auto`: OUT/auto_n.json (N, the rule, the curves); returns its content.

    `landmarks`: the one benchmark's ground truth; `descriptors`: one DESC/<method> folder per
    method; `ranked_ids`: the photo ids `mining select` would take its top N from, best first
    (`mining.stages.select.stage.ranked(...)`: `pid[order]`); `tolerance`: select's
    auto_tolerance; `setups`: evaluate's setups."""
    check_args(tolerance, descriptors, setups)
    dataset = load_landmarks(landmarks)
    ids = np.asarray(ranked_ids)
    if ids.size == 0:
        raise UserError("no candidate is left to select from")
    sizes = grid(int(ids.size))
    curves: dict[str, dict[str, dict[str, Any]]] = {}
    for d in descriptors:
        md = load_method(Path(d), dataset, [Ranking(ids, sizes)])
        bases = {s: setup_base(md, dataset.gnd, s) for s in setups}
        none = evaluate_setups(md, bases, None)
        per_size = [evaluate_setups(md, bases, md.above(0, k)) for k in sizes]
        curves[md.name] = {s: {"none": none[s]["mAP"], "all": per_size[-1][s]["mAP"],
                               "mined": [p[s]["mAP"] for p in per_size]} for s in setups}
    chosen = choose(curves, sizes, tolerance)
    result = {"n": chosen["n"], "tolerance": tolerance, "setups": list(setups), "available": int(ids.size),
              "rule": f"smallest N (and every larger grid N) with mined mAP ≤ (1 + {tolerance:g}) × all-candidates mAP, "
                      "for every method and setup",
              "sizes": sizes, "curves": curves, "first_ok": chosen["first_ok"], "binding": chosen["binding"],
              "landmarks_fingerprint": dataset.fingerprint()}
    atomic.write_json(Path(out) / "auto_n.json", result)
    return result


