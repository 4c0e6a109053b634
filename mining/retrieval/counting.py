"""Exact counting: `2·#{p < s} + #{p == s}` of a query's positives p for many similarities s.

Why a bucket table and not a sort or a binary search per value: the counting uses a per-query
table over a monotone bucketing of the similarity, exact by construction (a bucket that holds
no positive tells the count directly; only values sharing a bucket with a positive are
compared to it), and it runs in the compiled kernel `mining.retrieval.kernels.count_block` on a piece
of similarities while it is still in cache. `PositiveCounter` is one query's table;
`Counters` packs a method's tables into flat arrays for the kernel. The score (`mining score`,
`mining.stages.score.loop`) and the cascade's check (`mining.stages.cascade.stage`) count with
these, so a method's score is the same numbers wherever it is computed.
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from mining.retrieval.kernels import bucket_many, count_block

_BUCKETS_PER_POSITIVE = 32
_MIN_BUCKETS = 1024


@dataclass
class PositiveCounter:
    """Counts `2·#{p < s} + #{p == s}` for many s against one query's sorted positives.

    The bucketing `b(s) = int(clip((s - lo) · k, 0, B + 1))` (`mining.retrieval.kernels.bucket`) is
    monotone in s, and the positives are bucketed by the very same compiled function; so for
    an s in bucket b every positive in a lower bucket is < s and every one in a higher bucket
    is > s. `first[b]` (positives below bucket b) gives the count directly; only the positives
    sharing s's bucket are compared (ties count one half).
    """

    positives: np.ndarray  # sorted float32
    lo: np.float32
    scale: np.float32
    n_buckets: int
    first: np.ndarray  # int32 (n_buckets + 3,): number of positives in buckets < b

    @classmethod
    def build(cls, positive_sims: np.ndarray) -> "PositiveCounter":
        pos = np.sort(np.asarray(positive_sims, dtype=np.float32))
        if pos.size == 0 or not np.all(np.isfinite(pos)):
            raise ValueError("positives must be a non-empty finite array")
        n_buckets = max(_MIN_BUCKETS, _BUCKETS_PER_POSITIVE * pos.size)
        span = float(pos[-1]) - float(pos[0])
        width = span / n_buckets if span > 0 else 1.0
        lo = np.float32(float(pos[0]) - width)  # one empty bucket below the lowest positive
        scale = np.float32(1.0 / width)
        b = np.empty(pos.size, np.int64)
        bucket_many(pos, lo, scale, n_buckets, b)
        first = np.searchsorted(b, np.arange(n_buckets + 3), side="left").astype(np.int32)
        return cls(pos, lo, scale, n_buckets, first)

    def count_doubled(self, sims: np.ndarray) -> np.ndarray:
        """int64 array: 2·#{p < s} + #{p == s} for each s in `sims` (float32, 1-D); the same
        compiled kernel as the score loop, with a fraction weight of 1."""
        s = np.ascontiguousarray(sims, dtype=np.float32).reshape(-1, 1)
        packed = Counters.pack([self], np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64))
        packed.inv[:] = 1.0
        out = np.zeros(s.shape[0])
        packed.count_block(s, 0, s.shape[0], np.zeros(s.shape[0], np.int64), out, np.zeros((1, 1)))
        return out.astype(np.int64)


@dataclass
class Counters:
    """Counters packed into flat arrays for `mining.retrieval.kernels.count_block`; entry k counts
    similarity row `rows[k]` (dataset query `query[k]`, landmark `landmark[k]`)."""

    rows: np.ndarray
    query: np.ndarray
    landmark: np.ndarray
    inv: np.ndarray  # 1 / (2·|P|): count_doubled · inv is the fraction
    lo: np.ndarray
    scale: np.ndarray
    n_buckets: np.ndarray
    tab_off: np.ndarray
    first: np.ndarray
    pos_off: np.ndarray
    positives: np.ndarray

    @classmethod
    def pack(cls, single: list[PositiveCounter], rows: np.ndarray, query: np.ndarray,
             landmark: np.ndarray) -> "Counters":
        def offsets(arrays: list[np.ndarray]) -> np.ndarray:
            return np.cumsum([0] + [a.size for a in arrays[:-1]]).astype(np.int64)

        return cls(
            rows=rows, query=query, landmark=landmark,
            inv=np.array([1.0 / (2.0 * c.positives.size) for c in single], np.float64),
            lo=np.array([c.lo for c in single], np.float32),
            scale=np.array([c.scale for c in single], np.float32),
            n_buckets=np.array([c.n_buckets for c in single], np.int64),
            tab_off=offsets([c.first for c in single]) if single else np.zeros(0, np.int64),
            first=np.concatenate([c.first for c in single]) if single else np.zeros(1, np.int32),
            pos_off=offsets([c.positives for c in single]) if single else np.zeros(0, np.int64),
            positives=np.concatenate([c.positives for c in single]) if single else np.zeros(1, np.float32),
        )

    @classmethod
    def build(cls, positive_sims: list[np.ndarray], query_index: np.ndarray, q_landmark: np.ndarray) -> "Counters":
        """A method's counters: one per similarity row whose query has positives (`positive_sims[row]`:
        its positives' similarities; `query_index[row]`: the row's query; `q_landmark[query]`: its
        landmark)."""
        rows = [row for row, ps in enumerate(positive_sims) if len(ps)]
        single = [PositiveCounter.build(positive_sims[row]) for row in rows]
        rows_a = np.array(rows, np.int64)
        query = np.asarray(query_index, np.int64)[rows_a] if rows else np.zeros(0, np.int64)
        return cls.pack(single, rows_a, query, q_landmark[query].astype(np.int64))

    def subset(self, keep: np.ndarray) -> "Counters":
        """Only the counters `keep` (indices or mask); tables and positives are shared."""
        per_k = {f: getattr(self, f)[keep] for f in ("rows", "query", "landmark", "inv", "lo", "scale",
                                                      "n_buckets", "tab_off", "pos_off")}
        return Counters(**per_k, first=self.first, positives=self.positives)

    def count_block(self, sims: np.ndarray, j0: int, j1: int, target: np.ndarray, acc: np.ndarray,
                    group_sum: np.ndarray, group: np.ndarray | None = None) -> None:
        """Add the fractions of candidates j0..j1 of `sims` to `acc[j]` and to
        `group_sum[target[j], group[k]]` (group: the landmark of counter k by default)."""
        count_block(sims, j0, j1, np.asarray(target, np.int64), self.rows, self.lo, self.scale, self.n_buckets,
                    self.tab_off, self.first, self.pos_off, self.positives, self.inv,
                    self.landmark if group is None else group, acc, group_sum)
