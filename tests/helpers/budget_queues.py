"""Per-landmark review rankings for the review budget's tests (`mining.stages.score.budget` and the
report's section on how it was spent, `mining.stages.report.review_budget`)."""

from __future__ import annotations

import numpy as np


def random_queues(seed: int, n_landmarks: int = 9):
    """Per landmark a ranking (risk descending, photo id ascending) of 0-30 items with many
    ties (risks on a grid of eighths), photo ids shared between landmarks."""
    rng = np.random.default_rng(seed)
    risks, pids = {}, {}
    for i in range(n_landmarks):
        n = int(rng.integers(0, 31))
        risk = rng.integers(1, 9, size=n) / 8
        pid = rng.choice(60, size=n, replace=False).astype(np.int64)
        order = np.lexsort((pid, -risk))
        risks[f"lm{(i * 7) % n_landmarks}"], pids[f"lm{(i * 7) % n_landmarks}"] = risk[order], pid[order]
    return risks, pids
