"""Ranking (protocols/ranking.py): a stable sort by similarity, in blocks."""

import numpy as np


def test_rank_by_similarity_is_a_stable_sort_in_blocks(monkeypatch):
    from mining.stages.evaluate.protocols import ranking

    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, (50, 4)).astype(np.float32)  # few distinct values: many equal scores
    q = rng.integers(0, 3, (7, 4)).astype(np.float32)
    want = np.stack([sorted(range(50), key=lambda i: (-float(x[i] @ q[j]), i)) for j in range(7)], axis=1)
    monkeypatch.setattr(ranking, "_RANK_CELLS", 120)  # 2 queries a block: 4 blocks
    assert np.array_equal(ranking.rank_by_similarity(q, x), want)
    assert np.array_equal(ranking.rank_by_similarity(q, x, k=5), want[:5])
