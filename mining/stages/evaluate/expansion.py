"""α-query expansion (αQE) and database-side augmentation (DBA): evaluation rows beside the plain ones.

Definitions (Radenović, Tolias and Chum's αQE; DBA as in the revisited Oxford/Paris tables),
on unit vectors and cosine similarity s:
- αQE: q' = normalise(q + Σ_{i ≤ n} max(s_i, 0)^α · x_i) over the query's top n in the
  database searched (landmark database ∪ distractors); then q' is ranked again.
- DBA: every searched vector y (landmark database and distractors alike) becomes
  y' = normalise(y + Σ_{i ≤ n} max(s_i, 0)^α · x_i) over its own top n among the others;
  queries then rank y'. With both (`M+DBA+αQE`), αQE runs on the augmented vectors.
The top n is exact and totally ordered (similarity descending, then the vector's place in the
searched set: database in store order, then the distractors by photo id), so the same stores
give the same bytes.

Why the sets are materialised: both steps depend on which distractors are present (a
distractor in a query's top n changes q', and DBA's neighbours are searched among the
distractors too), so unlike the plain rows (one streamed pass, `histograms`) each distractor
set is evaluated on its own: no distractors, each random N, the mined N (not all candidates:
DBA over the whole pool is that pool's own all-pairs search). The metrics then come from
the plain rows' code (`histograms.reduce_method`, `experiment.evaluate_setups`) on the
expanded similarities. Only methods whose stores are of kind "global" get these rows.

Memory, per set of N distractors and a database of B images, dim d: the candidates of all the
sets once as stored (float16: 2·d bytes a row), at most three float32 copies of the searched
vectors (the distractors', the searched set's, its DBA: 12·d·(B + N) bytes), the queries'
similarities to them (4·queries·(B + N) bytes) and one tile of similarities of at most
TILE_BYTES; never a (B + N)² matrix. Time: DBA is (B + N)²·d multiply-adds per set (its exact
all-pairs neighbour search), αQE 2·queries·(B + N)·d.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mining.compute.jit import compiled
from mining.retrieval.methodstores import LandmarkSims, MethodStores, open_method, parse_ids, unit_rows
from mining.stages.evaluate.experiment import Sets, evaluate_setups, mean_std, setup_base
from mining.stages.evaluate.histograms import Ranking, reduce_method

AQE, DBA = "αQE", "DBA"
TILE_BYTES = 64 << 20  # one block of similarities (rows × searched vectors, float32)
SETS = ("none", "random", "mined")  # the distractor sets the expanded rows are evaluated with


@dataclass(frozen=True)
class Expansion:
    """evaluate's αQE and DBA settings (n = 0: that step is off)."""

    aqe_n: int = 0
    aqe_alpha: float = 3.0
    dba_n: int = 0
    dba_alpha: float = 3.0

    @classmethod
    def of(cls, options: Any) -> "Expansion":
        return cls(int(options.aqe_n), float(options.aqe_alpha), int(options.dba_n), float(options.dba_alpha))

    @classmethod
    def from_json(cls, doc: dict[str, Any] | None) -> "Expansion":
        """The settings `as_json` wrote into evaluation.json (none: both steps off)."""
        if not doc:
            return cls()
        return cls(int(doc["aqe"]["n"]), float(doc["aqe"]["alpha"]), int(doc["dba"]["n"]), float(doc["dba"]["alpha"]))

    def variants(self) -> list[tuple[str, ...]]:
        """The step lists reported: +αQE, +DBA, and +DBA+αQE when both are on."""
        out: list[tuple[str, ...]] = []
        if self.aqe_n:
            out.append((AQE,))
        if self.dba_n:
            out.append((DBA,))
        if self.aqe_n and self.dba_n:
            out.append((DBA, AQE))
        return out

    def as_json(self) -> dict[str, Any]:
        return {"aqe": {"n": self.aqe_n, "alpha": self.aqe_alpha}, "dba": {"n": self.dba_n, "alpha": self.dba_alpha},
                "sets": list(SETS)}


def row_name(method: str, steps: Sequence[str]) -> str:
    """A row's name: the method, then each step it adds (`cnn-gem+DBA+αQE`)."""
    return method + "".join(f"+{s}" for s in steps)


# ----------------------------------------------------------------------------- the two steps
@compiled
def _top_k(s, k, self_offset, idx, val):  # pragma: no cover (compiled)
    """Per row r of s: its k largest values, descending, ties to the lower column (the columns
    are scanned in order and an equal value never displaces an earlier one); column
    self_offset + r is skipped when self_offset ≥ 0. One pass over s."""
    for r in range(s.shape[0]):
        skip = self_offset + r if self_offset >= 0 else -1
        cnt = 0
        for j in range(s.shape[1]):
            x = s[r, j]
            if j == skip or (cnt == k and not x > val[r, k - 1]):
                continue
            p = cnt if cnt < k else k - 1
            while p > 0 and val[r, p - 1] < x:
                val[r, p] = val[r, p - 1]
                idx[r, p] = idx[r, p - 1]
                p -= 1
            val[r, p] = x
            idx[r, p] = j
            if cnt < k:
                cnt += 1


def top_neighbours(x: np.ndarray, y: np.ndarray, n: int, self_offset: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each row of x's n most similar rows of y (dot products), best first, ties by y's row
    index: (indices int64, similarities float32), both (len(x), n'), n' = min(n, rows left).
    `self_offset`: x is y[self_offset:self_offset + len(x)], and a row is not its own neighbour.
    Computed a block of x at a time (at most TILE_BYTES of similarities)."""
    m = y.shape[0] - (1 if self_offset is not None else 0)
    k = max(0, min(n, m))
    idx = np.zeros((x.shape[0], k), np.int64)
    val = np.zeros((x.shape[0], k), np.float32)
    if k == 0 or x.shape[0] == 0:
        return idx, val
    step = max(1, TILE_BYTES // (4 * y.shape[0]))
    for a in range(0, x.shape[0], step):
        b = min(x.shape[0], a + step)
        _top_k(x[a:b] @ y.T, k, -1 if self_offset is None else self_offset + a, idx[a:b], val[a:b])
    return idx, val


def weighted_sum(base: np.ndarray, y: np.ndarray, idx: np.ndarray, sims: np.ndarray, alpha: float) -> np.ndarray:
    """normalise(base + Σ_k max(sims[:, k], 0)^α · y[idx[:, k]]), row by row, float32."""
    out = np.array(base, np.float32, copy=True)
    w = np.maximum(sims, 0).astype(np.float32) ** np.float32(alpha)
    for k in range(idx.shape[1]):
        out += w[:, k, None] * y[idx[:, k]]
    return unit_rows(out)


def augment(y: np.ndarray, n: int, alpha: float) -> np.ndarray:
    """DBA: each row of y replaced by itself plus its top n among the other rows, weighted sim^α."""
    out = np.empty_like(y)
    step = max(1, TILE_BYTES // (4 * max(1, y.shape[0])))
    for a in range(0, y.shape[0], step):
        b = min(y.shape[0], a + step)
        idx, sims = top_neighbours(y[a:b], y, n, self_offset=a)
        out[a:b] = weighted_sum(y[a:b], y, idx, sims, alpha)
    return out


def expand(q: np.ndarray, y: np.ndarray, n: int, alpha: float) -> np.ndarray:
    """αQE: each query plus its top n of y, weighted sim^α."""
    idx, sims = top_neighbours(q, y, n)
    return weighted_sum(q, y, idx, sims, alpha)


# ----------------------------------------------------------------------------- the rows
@dataclass
class _Vectors:
    """One global method's vectors: queries, database, and the candidates of every set."""

    name: str
    q_index: np.ndarray  # dataset query index of each query row
    db_index: np.ndarray  # dataset imlist index of each database row
    queries: np.ndarray  # float32 unit rows
    database: np.ndarray  # float32 unit rows
    cand_ids: np.ndarray  # sorted photo ids of the candidates kept
    cand_rows: np.ndarray  # their vectors as stored (float16)

    def distractors(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(photo ids, float32 unit rows) of the set's candidates that were described, by photo id."""
        pos = np.searchsorted(self.cand_ids, ids)
        pos = np.minimum(pos, max(0, self.cand_ids.size - 1))
        found = np.sort(pos[self.cand_ids[pos] == ids]) if self.cand_ids.size else np.zeros(0, np.int64)
        return self.cand_ids[found], unit_rows(self.cand_rows[found])


def _load(stores: MethodStores, dataset: Any, wanted: np.ndarray) -> _Vectors:
    q_ids, q = stores.queries.load_all()
    d_ids, d = stores.database.load_all()
    where = LandmarkSims.from_ids(str(stores.path), dataset, q_ids, d_ids, np.zeros((0, 0), np.float32))
    id_parts, row_parts = [], []
    for ids, block in stores.candidates.iter_blocks():
        photo = parse_ids(ids, f"{stores.path}/candidates")
        take = np.flatnonzero(np.isin(photo, wanted))
        id_parts.append(photo[take])
        row_parts.append(np.asarray(block)[take])
    cand = np.concatenate(id_parts) if id_parts else np.zeros(0, np.int64)
    dim = q.shape[1] if q.ndim == 2 else 0
    rows = np.concatenate(row_parts) if row_parts else np.zeros((0, dim), np.float16)
    order = np.argsort(cand, kind="stable")
    return _Vectors(stores.name, where.query_index, where.db_index, unit_rows(q), unit_rows(d), cand[order],
                    rows[order])


def _set_metrics(v: _Vectors, dataset: Any, setups: Sequence[str], ids: np.ndarray, steps: Sequence[str],
                 ex: Expansion, augmented: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Metrics per setup of one row (its steps) with one distractor set (photo ids); `augmented`
    keeps the set's DBA vectors for the next row that needs them."""
    d_ids, d_rows = v.distractors(ids)
    y = np.concatenate([v.database, d_rows]) if d_rows.size else v.database
    if DBA in steps:
        if DBA not in augmented:
            augmented[DBA] = augment(y, ex.dba_n, ex.dba_alpha)
        y = augmented[DBA]
    q = expand(v.queries, y, ex.aqe_n, ex.aqe_alpha) if AQE in steps else v.queries
    sims = q @ y.T
    ndb = v.database.shape[0]
    landmark = LandmarkSims(v.q_index, v.db_index, np.ascontiguousarray(sims[:, :ndb]))
    blocks = [(d_ids, np.ascontiguousarray(sims[:, ndb:]))] if d_ids.size else []
    md = reduce_method(v.name, dataset, landmark, blocks, [Ranking.of_set(ids)] if ids.size else [])
    bases = {s: setup_base(md, dataset.gnd, s) for s in setups}
    return evaluate_setups(md, bases, md.above(0, ids.size) if ids.size else None)


def method_rows(method_dir: Path, dataset: Any, sets: Sets, setups: Sequence[str], ex: Expansion,
                benchmark: str | None = None) -> dict[str, Any]:
    """{row name: {method, steps, results: {setup: {none, random, mined, all: None}}}} for one
    method; {} when it is not a global method or no step is on."""
    chosen = {"none": [np.zeros(0, np.int64)], "mined": [np.asarray(sets.mined[:sets.n], np.int64)],
              "random": [np.asarray(r[:sets.n], np.int64) for r in sets.random]}
    return rows_of(open_method(method_dir, benchmark=benchmark), dataset, chosen, setups, ex)


def rows_of(stores: MethodStores, dataset: Any, chosen: dict[str, list[np.ndarray]], setups: Sequence[str],
            ex: Expansion) -> dict[str, Any]:
    """`method_rows` of a method's stores (a run's, or a kit's) with the distractor sets `chosen`
    ({kind: [photo ids, ...]}; several for random: mean ± std); a kind not chosen is None."""
    if not ex.variants() or not stores.is_global:
        return {}
    wanted = np.unique(np.concatenate([a for parts in chosen.values() for a in parts]))
    v = _load(stores, dataset, wanted)
    per: dict[tuple[str, ...], dict[str, list[Any]]] = {steps: {k: [] for k in chosen} for steps in ex.variants()}
    for kind, parts in chosen.items():
        for ids in parts:  # one set at a time: its DBA vectors are dropped before the next
            augmented: dict[str, np.ndarray] = {}
            for steps in ex.variants():
                per[steps][kind].append(_set_metrics(v, dataset, setups, ids, steps, ex, augmented))
    out = {}
    for steps, by_kind in per.items():
        results = {}
        for s in setups:
            rnd = [r[s] for r in by_kind.get("random", [])]
            results[s] = {"none": by_kind["none"][0][s], "random": mean_std(rnd) if rnd else None,
                          "mined": by_kind["mined"][0][s], "all": None}
        out[row_name(v.name, steps)] = {"method": v.name, "steps": list(steps), "results": results}
    return out


def add_rows(report: dict[str, Any], method_dirs: Sequence[Path], dataset: Any, sets: Sets, setups: Sequence[str],
             ex: Expansion, benchmark: str | None = None) -> None:
    """Add the αQE/DBA rows of every global method to an evaluation report (`variants`,
    with the settings under `expansion`); nothing when both steps are off."""
    if not ex.variants():
        return
    report["expansion"] = ex.as_json()
    variants = report.setdefault("variants", {})
    for d in method_dirs:
        variants.update(method_rows(Path(d), dataset, sets, setups, ex, benchmark))
