"""The +SP ranking: each query's shortlist re-ranked by spatial verification (`mining.retrieval.spatial`).

As in the revisited Oxford/Paris paper's "+SP" rows: the images of a query's shortlist that
one geometric transformation matches with at least `min_inliers` inliers go ahead of every
other image, by inlier count, ties by the original similarity; the rest keep their order.
It is applied to the similarities themselves, so every reader of a method's similarities
(the distractor score, the evaluation) sees the verified ranking through the same numbers:
a verified image's similarity becomes 4 × inliers + s (s ∈ [-1, 1], so verified images with
more inliers always come first, and equal counts keep their order by s), every other
similarity stays s.

The shortlist of a query is fixed, whatever distractor set is evaluated: its top `top_k`
database images and its top `top_k` candidates of the whole pool (each by similarity, ties
in store order). With no distractors that is exactly +SP on the database; with a distractor
set D it verifies the top k of database ∪ D whenever D's top k are among the pool's (the
mined set, the whole pool), and a larger shortlist than +SP would otherwise. The candidates'
shortlist needs the pool's top k first: their similarities are computed twice (a first pass
finds the top k, the second delivers the re-ranked blocks).

Deterministic: the shortlists are total orders, the inlier counts do not depend on the
thread that computes them (`mining.retrieval.spatial`), and verification runs on a thread pool whose
results are taken in input order.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator, Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from mining.files.names import STORE
from mining.retrieval import spatial
from mining.compute.cluster import available_cpus
from mining.retrieval.descriptors import Store, iter_similarities
from mining.errors import UserError

LIFT = 4.0  # a verified similarity is LIFT × inliers + s


class KeypointStore:
    """The kept keypoints of a descriptor store, looked up by store id, one shard read at a time."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._where: dict[str, tuple[str, int]] | None = None

    def _index(self) -> dict[str, tuple[str, int]]:
        if self._where is None:
            self._where = {i: (s, r) for s in self.store.shard_names() for r, i in enumerate(self.store.shard_ids(s))}
        return self._where

    def __contains__(self, i: str) -> bool:
        return i in self._index()

    def get(self, ids: Sequence[str]) -> dict[str, spatial.Keypoints]:
        where = self._index()
        by_shard: dict[str, list[str]] = {}
        for i in dict.fromkeys(ids):
            by_shard.setdefault(where[i][0], []).append(i)
        out = {}
        for shard, members in sorted(by_shard.items()):
            path = self.store.path / "shards"
            if not (path / f"{shard}{spatial.GEOM_SUFFIX}").is_file():
                raise UserError(f"{self.store.path}: shard {shard} has no keypoints ({spatial.GEOM_SUFFIX}); "
                                "describe again with spatial_verification set")
            g = spatial.load_shard(path, shard)
            out.update({i: g.image(where[i][1]) for i in members})
        return out


def verify_pairs(pairs: Sequence[tuple[spatial.Keypoints, spatial.Keypoints]],
                 threads: int | None = None) -> list[tuple[int, np.ndarray]]:
    """`spatial.verify` of every pair, in order, on a thread pool (OpenCV and the products
    release the GIL; each on one BLAS thread)."""
    if not pairs:
        return []
    with threadpool_limits(limits=1), ThreadPoolExecutor(max(1, threads or available_cpus())) as pool:
        return list(pool.map(lambda p: spatial.verify(*p), pairs))


def count_inliers(pairs: Sequence[tuple[spatial.Keypoints, spatial.Keypoints]]) -> np.ndarray:
    return np.array([n for n, _ in verify_pairs(pairs)], np.int64)


def lifted(sims: np.ndarray, inliers: np.ndarray, min_inliers: int) -> np.ndarray:
    """The +SP similarities of shortlisted entries: LIFT × inliers + s where verified, else s."""
    s = np.asarray(sims, np.float64)
    return np.where(inliers >= min_inliers, LIFT * inliers + s, s)


def shortlist(sims: np.ndarray, k: int) -> list[np.ndarray]:
    """Per row, the columns of its k largest finite values (ties: lower column first)."""
    out = []
    for row in np.asarray(sims):
        finite = np.flatnonzero(np.isfinite(row))
        out.append(finite[np.lexsort((finite, -row[finite]))][:k].astype(np.int64))
    return out


def verified_landmark(queries: Store, database: Store, q_ids: Sequence[str], db_ids: Sequence[str],
                      sims: np.ndarray, sv: dict[str, int]) -> np.ndarray:
    """Query × database similarities with each query's top k database images verified."""
    out = np.array(sims, np.float32, copy=True)
    tops = shortlist(sims, sv["top_k"])
    if not sum(len(t) for t in tops):
        return out
    q_kp = KeypointStore(queries).get(q_ids)
    d_kp = KeypointStore(database).get([db_ids[c] for top in tops for c in top])
    rows = np.concatenate([np.full(len(t), r, np.int64) for r, t in enumerate(tops)])
    cols = np.concatenate([np.asarray(t, np.int64) for t in tops])
    n = count_inliers([(q_kp[q_ids[r]], d_kp[db_ids[c]]) for r, c in zip(rows, cols)])
    out[rows, cols] = lifted(sims[rows, cols], n, sv["min_inliers"]).astype(np.float32)
    return out


def candidate_shortlists(queries: Store, candidates: Store, k: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Each query's top k candidates of the whole pool: (rows, store positions, ids of those
    positions in order), from one pass over the candidate similarities."""
    best_s: np.ndarray | None = None
    best_i: np.ndarray | None = None
    ids_of: dict[int, str] = {}
    offset = 0
    for ids, sims in iter_similarities(queries, candidates):
        pos = np.arange(offset, offset + len(ids), dtype=np.int64)
        s = np.where(np.isfinite(sims), sims, -np.inf).astype(np.float64)
        if best_s is None:
            best_s, best_i = np.zeros((s.shape[0], 0)), np.zeros((s.shape[0], 0), np.int64)
        cs = np.concatenate([best_s, s], axis=1)
        ci = np.concatenate([best_i, np.broadcast_to(pos, s.shape)], axis=1)
        order = np.lexsort((ci, -cs), axis=1)[:, :k]
        best_s, best_i = np.take_along_axis(cs, order, 1), np.take_along_axis(ci, order, 1)
        keep = set(best_i.ravel().tolist())
        ids_of = {p: i for p, i in ids_of.items() if p in keep}
        ids_of.update({int(p): ids[int(p) - offset] for p in keep if p >= offset})
        offset += len(ids)
    if best_s is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), []
    finite = np.isfinite(best_s)
    rows = np.nonzero(finite)[0].astype(np.int64)
    cols = best_i[finite]
    return rows, cols, [ids_of[int(c)] for c in cols]


def verified_candidates(queries: Store, candidates: Store, sv: dict[str, int]) -> Iterator[tuple[list[str], np.ndarray]]:
    """`iter_similarities(queries, candidates)` with each query's top k of the pool verified."""
    rows, cols, c_ids = candidate_shortlists(queries, candidates, sv["top_k"])
    q_ids = queries.ids()
    q_kp = KeypointStore(queries).get(q_ids) if rows.size else {}
    c_kp = KeypointStore(candidates).get(c_ids) if rows.size else {}
    n = count_inliers([(q_kp[q_ids[r]], c_kp[c]) for r, c in zip(rows, c_ids)])
    offset = 0
    for ids, sims in iter_similarities(queries, candidates):
        inside = (cols >= offset) & (cols < offset + len(ids))
        if inside.any():
            sims = np.array(sims, np.float32, copy=True)
            r, c = rows[inside], cols[inside] - offset
            sims[r, c] = lifted(sims[r, c], n[inside], sv["min_inliers"]).astype(np.float32)
        offset += len(ids)
        yield ids, sims


def store_settings(store: Store, required: bool) -> dict[str, int] | None:
    """A store's spatial verification settings; None when it keeps no keypoints (an error
    when `required`); one outside describe's rule (`spatial.valid`) is refused."""
    raw = (store.info.get("params") or {}).get("spatial_verification")
    if raw is not None and not spatial.valid(raw):
        raise UserError(f"{store.path}: {STORE}'s spatial_verification={raw!r} is not allowed (spatial_verification "
                        f"must be {spatial.RULE} or null, as describe requires); describe this set again")
    sv = spatial.settings(store.info.get("params"))
    if sv is None and required:
        raise UserError(f"{store.path}: method {store.method} was described without spatial_verification "
                        "(no keypoints kept); set it in the method's params and describe again")
    return sv


def has_keypoints(stores: Any) -> bool:
    """All three stores of a method keep keypoints."""
    return all(store_settings(s, False) is not None for s in (stores.queries, stores.database, stores.candidates))
