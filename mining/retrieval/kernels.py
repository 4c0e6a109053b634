"""Compiled inner loops (numba): the float16 decode and the score's positive counting.

Why compiled: for a few dozen queries the similarity GEMM is cheap, and whatever runs per
(candidate, query) pair in numpy costs a pass over memory per operation (subtract, scale,
clip, cast, gather, accumulate ...). Here each pair is one pass, in cache-sized tiles, and
the functions release the GIL so `mining.stages.score` runs them in its own threads beside
single-threaded BLAS calls. `cache=True`: the machine code is kept next to this file (or in
numba's user cache when that is read-only), so only the first run pays the compile.

Exactness: `bucket` is the one definition of the bucketing used both to build a counter's
table and to count with it (same float32 operations, so the same bucket for the same value);
the count is exact by construction (see `mining.stages.score.PositiveCounter`).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from mining.compute.jit import compiled

TILE = 512  # candidates per tile: a tile's similarities and sums stay in L2 across rows


@intrinsic
def _half_bits_to_float32(typingctx, bits):  # noqa: ARG001 (numba's intrinsic signature)
    """IEEE half (as its uint16 bits) → float32 via LLVM `fpext`: the CPU's F16C instruction
    where it has one; exact for every value (float32 holds every float16)."""
    sig = types.float32(types.uint16)

    def codegen(context, builder, signature, args):  # noqa: ARG001
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return sig, codegen


@compiled
def decode_f16(src: np.ndarray, dst: np.ndarray) -> None:  # pragma: no cover (compiled)
    """dst[...] = src as float32; `src` holds float16 values viewed as uint16, same shape."""
    s = src.reshape(-1)
    d = dst.reshape(-1)
    for i in range(s.size):
        d[i] = _half_bits_to_float32(s[i])


def _as_float32(x):  # noqa: ANN001, ANN202 (typed by the overload below)
    """A stored value as float32: float16 bits (uint16) decoded, any other number cast."""


@overload(_as_float32)
def _as_float32_typed(x):  # noqa: ANN001, ANN202
    if x == types.uint16:
        return lambda x: _half_bits_to_float32(x)
    return lambda x: np.float32(x)


@compiled
def pair_cosines(rows, first, second, scale, out) -> None:  # pragma: no cover (compiled)
    """out[p] = Σ_k (rows[first[p], k] / scale[first[p]]) · (rows[second[p], k] / scale[second[p]]):
    each factor a float32 quotient (the bits of `mining.retrieval.methodstores.unit_rows` when `scale` is
    its clipped row norm), the sum in float64. `rows`: float32, or float16 viewed as uint16."""
    for p in range(out.size):
        i, j = first[p], second[p]
        si, sj = scale[i], scale[j]
        acc = 0.0
        for k in range(rows.shape[1]):
            acc += np.float64(_as_float32(rows[i, k]) / si) * np.float64(_as_float32(rows[j, k]) / sj)
        out[p] = acc


@compiled
def bucket(s, lo, scale, n_buckets):  # pragma: no cover (compiled)
    """Monotone bucket of a float32 similarity: int(clip((s - lo)·scale, 0, B + 1)); NaN → 0."""
    x = (s - lo) * scale
    if not x > 0:
        return 0
    if x >= n_buckets + 1:
        return n_buckets + 1
    return int(x)


@compiled
def bucket_many(values, lo, scale, n_buckets, out) -> None:  # pragma: no cover (compiled)
    for i in range(values.size):
        out[i] = bucket(values[i], lo, scale, n_buckets)


@compiled
def count_block(sims, j0, j1, target, rows, lo, scale, n_buckets, tab_off, first, pos_off, positives, inv,
                group, acc, group_sum) -> None:  # pragma: no cover (compiled)
    """Fractions for candidates j0..j1 of `sims` (candidate-major, (n, n_rows)).

    Counter k (a similarity row with positives) counts c = 2·#{p < s} + #{p == s}:
    `first[tab_off[k] + b]` is the number of its positives in buckets below b, and only
    the positives sharing s's bucket (usually none) are compared one by one. f = c·inv[k];
    per candidate j, `acc[j]` gets Σ_k f in counter order and `group_sum[target[j],
    group[k]]` each f in the same order (group: the counter's landmark, or its query), so
    no sum depends on how the candidates were split into blocks. (The count is written out
    here rather than called: numba does not inline a callee with a loop, and the call per
    pair cost 2x.)
    """
    for t0 in range(j0, j1, TILE):
        t1 = min(j1, t0 + TILE)
        for k in range(rows.size):
            r = rows[k]
            lo_k = lo[k]
            sc = scale[k]
            nb = n_buckets[k]
            to = tab_off[k]
            po = pos_off[k]
            iv = inv[k]
            g = group[k]
            for j in range(t0, t1):
                s = sims[j, r]
                b = bucket(s, lo_k, sc, nb)
                a = first[to + b]
                e = first[to + b + 1]
                c = 2 * a
                for i in range(a, e):
                    p = positives[po + i]
                    if p < s:
                        c += 2
                    elif p == s:
                        c += 1
                    else:
                        break
                f = c * iv
                acc[j] += f
                group_sum[target[j], g] += f
