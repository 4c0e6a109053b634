"""The Hamming-distance index (mining/retrieval/hashindex.py): every pair within the radius, once."""

import numpy as np
import pytest

from mining.stages.neardup import stage as neardup


@pytest.mark.parametrize("radius", [0, 1, 5, 10, 16, 30, 64])
def test_hash_index_finds_every_pair_within_the_radius_once(radius):
    from mining.retrieval.hashindex import hamming_pairs, plan

    rng = np.random.default_rng(radius)
    h = rng.integers(0, 2**63, 800, dtype=np.int64).astype(np.uint64)
    h[400:] = h[:400] ^ (np.uint64(1) << rng.integers(0, 64, 400).astype(np.uint64))  # one bit flipped
    h[400:600] ^= h[:200] & np.uint64(0xFFFF)  # and more bits: pairs at every distance
    h[-40:] = h[-1]  # a pile of equal hashes: one bucket on every substring
    d = neardup.hamming(h[:, None], h[None, :])
    want = np.argwhere(np.triu(d <= radius, 1))
    got = hamming_pairs(h, radius, threads=2, chunk=64)
    if radius >= 30:  # all pairs are cheaper there: the caller compares all pairs
        assert got is None and plan(800, radius) is None
        return
    assert len(want) >= 780 and np.array_equal(got, want)
    subs = plan(10**6, radius)  # the substrings cover all 64 bits and their radii the pigeonhole
    assert sum(b for _, b, _ in subs) == 64 and sum(r + 1 for *_, r in subs) >= radius + 1
