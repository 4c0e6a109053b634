"""The test oracle: revisitop's per-query `compute_map` loop, kept verbatim in spirit.

Tests check the compiled `mining.metrics.compute_map` against it on random data
(tests/unit/test_evaluate_metrics.py, test_evaluate_experiment.py), and
`python -m benchmarks.evaluate` times both side by side. Not part of the package.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def compute_ap_loop(ranks: np.ndarray, nres: int) -> float:
    ap = 0.0
    recall_step = 1.0 / nres
    for j in np.arange(len(ranks)):
        rank = ranks[j]
        precision_0 = 1.0 if rank == 0 else float(j) / rank
        precision_1 = float(j + 1) / (rank + 1)
        ap += (precision_0 + precision_1) * recall_step / 2.0
    return ap


def compute_map_loop(
    ranks: np.ndarray, gnd: Sequence[dict[str, Any]], kappas: Sequence[int] = ()
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """revisitop's loop (positives deduplicated, as `metrics.compute_map` does)."""
    total = 0.0
    nq = len(gnd)
    aps = np.zeros(nq)
    pr = np.zeros(len(kappas))
    prs = np.zeros((nq, len(kappas)))
    nempty = 0
    for i in np.arange(nq):
        qgnd = np.unique(np.array(gnd[i]["ok"], dtype=np.int64))
        if qgnd.shape[0] == 0:
            aps[i] = float("nan")
            prs[i, :] = float("nan")
            nempty += 1
            continue
        qgndj = np.array(gnd[i].get("junk", []), dtype=np.int64)
        pos = np.arange(ranks.shape[0])[np.isin(ranks[:, i], qgnd)]
        junk = np.arange(ranks.shape[0])[np.isin(ranks[:, i], qgndj)]
        k = 0
        ij = 0
        if len(junk):
            ip = 0
            while ip < len(pos):
                while ij < len(junk) and pos[ip] > junk[ij]:
                    k += 1
                    ij += 1
                pos[ip] = pos[ip] - k
                ip += 1
        ap = compute_ap_loop(pos, len(qgnd))
        total += ap
        aps[i] = ap
        pos += 1
        for j in np.arange(len(kappas)):
            kq = min(max(pos), kappas[j]) if len(pos) else kappas[j]
            prs[i, j] = (pos <= kq).sum() / kq
        pr = pr + prs[i, :]
    return total / (nq - nempty), aps, pr / (nq - nempty), prs
