"""Rankings from a user's results: read as given, or computed from descriptors by dot product,
and turned into image names per query."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from mining.errors import UserError
from mining.stages.evaluate.protocols.readers import Results, read_descriptors, read_ranks


_RANK_CELLS = 1 << 24  # similarity cells sorted at once when ranking descriptors


def rank_by_similarity(queries: np.ndarray, database: np.ndarray, k: int | None = None) -> np.ndarray:
    """(k or all, n queries) database indices by decreasing dot product; equal scores keep index order."""
    n = database.shape[0]
    k = n if k is None else min(k, n)
    out = np.empty((k, queries.shape[0]), dtype=np.int64)
    block = max(1, _RANK_CELLS // max(n, 1))
    for a in range(0, queries.shape[0], block):
        sim = queries[a : a + block] @ database.T  # one contiguous row per query: faster to sort
        out[:, a : a + block] = np.argsort(-sim, axis=1, kind="stable")[:, :k].T
    return out


def index_ranks(res: Results, qnames: Sequence[str], n_db: int, k: int | None,
                 query_rows: Sequence[int] | None = None, distractors: bool = False) -> np.ndarray:
    """ranks (list length, len(qnames)) from a .npy or from descriptors.

    n_db: the number of database rows the descriptors must have (with `distractors`: at
    least, the rows past it being distractors). query_rows: database rows that are the
    queries, used when no --queries file is given (Holidays, UKBench: every query is a
    database image).
    """
    if res.ranks is not None:
        ranks = read_ranks(res.ranks, len(qnames))
        return ranks if k is None else ranks[:k]
    assert res.database is not None  # evaluate_protocol asks for ranks or descriptors
    x = read_descriptors(res.database, "database descriptors")
    if x.shape[0] < n_db or (x.shape[0] > n_db and not distractors):
        raise UserError(f"{res.database}: {x.shape[0]} database rows, but the image list has {n_db} images"
                        + (" (rows in imlist order, then any distractors)" if distractors else ""))
    if res.queries is not None:
        q = read_descriptors(res.queries, "query descriptors", x.shape[1])
        if q.shape[0] != len(qnames):
            raise UserError(f"{res.queries}: {q.shape[0]} query rows, but there are {len(qnames)} queries")
    elif query_rows is not None:
        q = x[np.asarray(query_rows, dtype=np.int64)]
    else:
        raise UserError("--queries (query descriptors, .npy) is needed with --database")
    return rank_by_similarity(q, x.astype(q.dtype, copy=False), k)


def names_of(ranks: np.ndarray, qnames: Sequence[str], dbnames: Sequence[str], src: Path | None) -> dict[str, list[str]]:
    if ranks.size and int(ranks.max()) >= len(dbnames):
        raise UserError(f"{src or 'ranks'}: database index {int(ranks.max())} is beyond the "
                        f"{len(dbnames)} images of the image list")
    names = np.asarray(list(dbnames), dtype=object)
    return {q: names[ranks[:, j]].tolist() for j, q in enumerate(qnames)}


def rows_of(qnames: Sequence[str], dbnames: Sequence[str]) -> list[int]:
    index = {n: i for i, n in enumerate(dbnames)}
    missing = [q for q in qnames if q not in index]
    if missing:
        raise UserError(f"query {missing[0]!r} is not in the database images (give --queries descriptors)")
    return [index[q] for q in qnames]
