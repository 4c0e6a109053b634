"""A method's descriptor stores, as every retrieval stage reads them.

`mining describe` writes DESC/<method>/{queries,database,candidates}; score, evaluate,
neardup, leakrisk and `select: {n: auto}` all start from there. This module is the one place
that opens the three stores, maps their ids onto the landmark dataset (store query ids →
dataset query index, database ids → imlist index, candidate ids → int64 photo ids), gathers
each query's positive similarities and streams the candidates; plus the total order of
scored photos that select, evaluate and choose_n share. A stage takes these from here
instead of from another stage (docs/architecture.md, "Layers").

Why each check is a UserError: a store from another method, another landmark dataset or
another candidate set is the user's wrong folder, and one line naming the folder and the
first offending id says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from mining.datasets.benchmarks import store_dir
from mining.retrieval.descriptors import GLOBAL, as_float32, iter_similarities, l2_normalize, open_store
from mining.errors import UserError
from mining.retrieval.reranking import has_keypoints, store_settings, verified_candidates, verified_landmark

PARTS = ("queries", "database", "candidates")


# ----------------------------------------------------------------------------- photo ids
def parse_ids(ids: Iterable[str], what: str) -> np.ndarray:
    """Candidate store ids are decimal photo ids; anything else is the user's wrong store."""
    ids = list(ids)
    try:
        return np.array([int(i) for i in ids], dtype=np.int64)
    except (TypeError, ValueError):
        bad = next(i for i in ids if not str(i).strip().lstrip("-").isdigit())
        raise UserError(f"{what}: candidate id {bad!r} is not a decimal photo id") from None


def rank_order(photo_id: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Indices by score descending, photo id ascending (a total order: deterministic)."""
    return np.lexsort((photo_id, -score))


def unit_rows(payload: Any) -> np.ndarray:
    """A global store's rows as float32 unit vectors (their dot products are cosines)."""
    return l2_normalize(as_float32(payload), axis=1)


# ----------------------------------------------------------------------------- the stores
@dataclass
class MethodStores:
    """DESC/<method>/{queries,database,candidates} of one method, opened."""

    path: Path
    queries: Any  # mining.retrieval.descriptors.Store
    database: Any
    candidates: Any
    spatial: dict[str, int] | None = None  # +SP (`mining.retrieval.reranking`): the similarities are the verified ones

    @property
    def name(self) -> str:
        return self.candidates.method

    @property
    def is_global(self) -> bool:
        return self.candidates.kind == GLOBAL and self.queries.kind == GLOBAL

    def landmark_similarities(self, dataset: Any) -> "LandmarkSims":
        """Every described query × every described database image, mapped onto `dataset`."""
        q_ids = self.queries.ids()
        db_ids: list[str] = []
        blocks = []
        for ids, sims in iter_similarities(self.queries, self.database):
            db_ids.extend(ids)
            blocks.append(sims)
        sims_db = np.concatenate(blocks, axis=1) if blocks else np.zeros((len(q_ids), 0), np.float32)
        if self.spatial is not None:
            sims_db = verified_landmark(self.queries, self.database, q_ids, db_ids, sims_db, self.spatial)
        return LandmarkSims.from_ids(str(self.path), dataset, q_ids, db_ids, sims_db)

    def candidate_similarities(self) -> Iterator[tuple[list[str], np.ndarray]]:
        """(candidate ids, similarities (query store rows, block) float32), one shard at a time."""
        if self.spatial is not None:
            return verified_candidates(self.queries, self.candidates, self.spatial)
        return iter_similarities(self.queries, self.candidates)

    def candidate_ids(self) -> np.ndarray:
        """Every candidate's photo id, in store order."""
        return parse_ids(self.candidates.ids(), f"{self.path}/candidates")


def open_method(method_dir: str | Path, global_for: str | None = None, benchmark: str | None = None,
                spatial: bool | None = False, method_of: Callable[[str], Any] | None = None) -> MethodStores:
    """Open DESC/<method>/{queries,database,candidates}; all three must be one method's.
    `global_for` (e.g. "near-duplicates need"): refuse a method without global descriptors.
    `benchmark`: one benchmark of a run that has several, whose queries and database are in
    DESC/<method>/benchmarks/<benchmark>/ (`mining.datasets.benchmarks.store_dir`). `spatial`: the
    +SP similarities (`mining.retrieval.reranking`; True: required, None: when the stores keep keypoints).
    `method_of`: what reads a non-global method's payloads (`mining.retrieval.descriptors.Store`)."""
    method_dir = Path(method_dir)
    stores = {}
    for part in PARTS:
        folder = method_dir if part == "candidates" else store_dir(method_dir, benchmark)
        if not (folder / part).is_dir():
            expected = ("DESC/<method>/{queries,database,candidates}" if benchmark is None else
                        f"DESC/<method>/candidates and DESC/<method>/benchmarks/{benchmark}/{{queries,database}}")
            raise UserError(f"{folder}: missing {part}/ descriptor store (expected {expected})")
        stores[part] = open_store(folder / part, method_of)
    name = stores["candidates"].method
    for part, st in stores.items():
        if st.method != name:
            raise UserError(f"{method_dir}/{part}: store is method {st.method!r}, candidates are {name!r}")
        if global_for is not None and st.kind != GLOBAL:
            raise UserError(f"{method_dir}: method {name!r} has no global descriptor; {global_for} one (e.g. cnn-gem)")
    out = MethodStores(method_dir, stores["queries"], stores["database"], stores["candidates"])
    if spatial is not False:
        if spatial or has_keypoints(out):
            out.spatial = store_settings(out.queries, True)
            for part in PARTS:
                store_settings(stores[part], True)
    return out


# ----------------------------------------------------------------------------- queries and positives
def query_rows(query_ids: Sequence[str], dataset: Any, where: str) -> np.ndarray:
    """int64 dataset query index of each query store id."""
    lookup = {n: i for i, n in enumerate(dataset.qimlist)}
    unknown = [i for i in query_ids if i not in lookup]
    if unknown:
        raise UserError(f"{where}/queries: {len(unknown)} ids are not queries of {dataset.path.name} "
                        f"(e.g. {unknown[0]!r})")
    return np.array([lookup[i] for i in query_ids], np.int64)


def database_columns(db_ids: Sequence[str], dataset: Any, where: str) -> np.ndarray:
    """int64 dataset imlist index of each database store id."""
    lookup = {n: i for i, n in enumerate(dataset.imlist)}
    for i in db_ids:
        if i not in lookup:
            raise UserError(f"{where}/database: id {i!r} is not in {dataset.path.name}'s imlist")
    return np.array([lookup[i] for i in db_ids], np.int64)


@dataclass
class LandmarkSims:
    """A method's query × database similarities: row r is dataset query `query_index[r]`,
    column c dataset image `db_index[c]` (only the images and queries that were described)."""

    query_index: np.ndarray  # int64 (rows,)
    db_index: np.ndarray  # int64 (columns,)
    sims: np.ndarray  # float32 (rows, columns)

    @classmethod
    def from_ids(cls, where: str, dataset: Any, query_ids: Sequence[str], db_ids: Sequence[str],
                 sims: np.ndarray) -> "LandmarkSims":
        return cls(query_rows(query_ids, dataset, where), database_columns(db_ids, dataset, where), sims)

    def dense(self, n_queries: int, n_database: int) -> np.ndarray:
        """float32 (n_queries, n_database): the similarities in dataset order, NaN where not described."""
        out = np.full((n_queries, n_database), np.nan, dtype=np.float32)
        if self.query_index.size and self.db_index.size:
            out[np.ix_(self.query_index, self.db_index)] = self.sims
        return out

    def positives(self, dataset: Any) -> tuple[list[np.ndarray], int]:
        """Per row: the similarities of its query's positives (Easy and Hard) that were
        described; and how many positives, over all rows, were not."""
        col_of = {int(d): c for c, d in enumerate(self.db_index)}
        out, missing = [], 0
        for row, qi in enumerate(self.query_index):
            pos = dataset.positives(int(qi))
            have = [col_of[p] for p in pos if p in col_of]
            missing += len(pos) - len(have)
            out.append(self.sims[row, have].astype(np.float32))
        return out, missing
