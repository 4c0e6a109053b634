"""`mining score` as a stage: descriptor stores (read through `mining.retrieval`) → the
loop's inputs → `score_candidates` → the output files."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from mining.datasets.benchmarks import as_list, fingerprint, load_all, qualify
from mining.retrieval.descriptors import similarity_function
from mining.errors import UserError
from mining.evidence.geometry import geometry_of
from mining.methods import get_method
from mining.retrieval.methodstores import open_method
from mining.stages.score import budget
from mining.stages.score.inputs import CandidateVectors, MethodInput, Problem
from mining.stages.score.loop import DEFAULT_CHUNK, score_candidates
from mining.stages.score.output import write_outputs
from mining.settings.options import ReviewOptions, ScoreOptions, defaults
from mining.evidence.since import days_taken, of_benchmarks


def method_from_stores(method_dir: Path, dataset, benchmark: str | None = None, bench_index: int = 0,
                       query_offset: int = 0) -> tuple[MethodInput, dict]:
    """Read DESC/<method>/{queries,database,candidates} into a MethodInput (+ its stats).
    With several benchmarks: `benchmark`'s queries and database (`mining.datasets.benchmarks.store_dir`),
    its rows numbered from `query_offset` in the run's queries."""
    # +SP when the stores keep keypoints
    stores = open_method(method_dir, benchmark=benchmark, spatial=None, method_of=get_method)
    landmark = stores.landmark_similarities(dataset)
    positive_sims, positives_missing = landmark.positives(dataset)
    missing_queries = sorted(set(range(len(dataset.qimlist))) - set(landmark.query_index.tolist()))
    ids = stores.candidate_ids()
    q_store, c_store = stores.queries, stores.candidates
    sim = similarity_function(q_store, c_store)
    _, q_payload = q_store.load_all()
    is_global = stores.is_global and stores.spatial is None

    def blocks() -> Iterator[np.ndarray | CandidateVectors]:
        if stores.spatial is not None:  # the verified similarities (mining.retrieval.reranking)
            yield from (np.asarray(s, dtype=np.float32) for _, s in stores.candidate_similarities())
            return
        for _, payload in c_store.iter_blocks():
            # global descriptors: the loop multiplies them itself, fused with the counting
            yield CandidateVectors(payload) if is_global else np.asarray(sim(q_payload, payload), dtype=np.float32)

    stats = {"queries_without_descriptor": [dataset.qimlist[i] for i in missing_queries],
             "positives_without_descriptor": int(positives_missing), "spatial_verification": stores.spatial}
    return MethodInput(stores.name, landmark.query_index + query_offset, positive_sims, ids, blocks,
                       q_payload if is_global else None, bench_index), stats


def problem_of(benchmarks: Sequence, datasets: Sequence) -> Problem:
    """The queries and landmarks of every benchmark, in order (names `<benchmark>/<name>` with several)."""
    several = len(benchmarks) > 1
    names, q_landmark, landmarks = [], [], []
    for b, ds in zip(benchmarks, datasets):
        names += [qualify(b.name, q, several) for q in ds.qimlist]
        q_landmark += [qualify(b.name, ds.query_landmark(i), several) for i in range(len(ds.qimlist))]
        landmarks += [qualify(b.name, lm, several) for lm in ds.landmarks]
    return Problem(names, q_landmark, landmarks, [b.name for b in benchmarks] if several else [""])


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """What `mining score` reads: the landmarks and every method's stores; the rest orders the queue."""

    landmarks: Sequence[str]  # [NAME=]GND, one ground truth or several benchmarks (`benchmarks.as_list`)
    descriptors: Sequence[Path]  # one DESC/<method> folder per method
    near_duplicates: Path | None = None  # neardup.parquet: its probable landmark images head the queue
    candidates: Path | None = None  # the candidates Parquet (date_taken): the landmarks' `since` dates


def run(*, inputs: Inputs, out: Path, options: ScoreOptions, review: ReviewOptions | None = None,
        chunk: int = DEFAULT_CHUNK, threads: int | None = None, progress: bool = True) -> dict[str, Any]:
    """`mining score`: stores → scores.parquet, review_queue.parquet, stats.json.

    With several benchmarks (`inputs.landmarks`), every candidate is scored against every query
    of every benchmark. `inputs.near_duplicates`: probable landmark images head the queue;
    `inputs.candidates`: for the landmarks' `since` dates (mining/evidence/since.py).
    `review` (the manifest's review section, default its defaults): with a `budget`, the queue
    holds that many items in all, spread by leak risk, each landmark's top `min_per_landmark`
    first (`mining.stages.score.budget`), not review_top each."""
    review = review or defaults("review")
    if options.review_top < 1:
        raise UserError("--review-top must be at least 1")
    if review.budget is not None:
        budget.check(review.budget, review.min_per_landmark)
    benchmarks = as_list(inputs.landmarks)
    datasets = load_all(benchmarks)
    t0 = time.perf_counter()
    methods, read_stats = read_methods(inputs.descriptors, benchmarks, datasets)
    problem = problem_of(benchmarks, datasets)
    t_read = time.perf_counter() - t0
    since = of_benchmarks(benchmarks, datasets)  # landmarks that exist from a date (mining/evidence/since.py)
    result = score_candidates(problem, methods, chunk=chunk, review_top=review.budget or options.review_top,
                              progress=progress, threads=threads, since=since,
                              late_since=options.late_since == "allow",
                              taken_of=(lambda ids: days_taken(inputs.candidates, ids)) if inputs.candidates else None)
    if review.budget is not None:
        budget.apply_budget(result, review.budget, review.min_per_landmark)
    for name, st in read_stats.items():
        result.stats["methods"][name].update(st)
    result.stats.update(landmark_stats(benchmarks, datasets, problem))
    result.stats["seconds"]["read_landmark_descriptors"] = round(t_read, 3)
    write_outputs(result, problem, out, inputs.near_duplicates, geometry_of(inputs.descriptors, benchmarks, datasets))
    return result.stats


def read_methods(descriptors: Sequence[Path], benchmarks: Sequence, datasets: Sequence) -> tuple[list[MethodInput], dict]:
    """Every method's loop input per benchmark (its queries numbered on from the previous
    benchmark's), and what reading found per method (`<benchmark>/<method>` with several)."""
    several = len(benchmarks) > 1
    methods, read_stats, names = [], {}, set()
    for d in descriptors:
        offset = 0
        for bi, (b, ds) in enumerate(zip(benchmarks, datasets)):
            m, st = method_from_stores(Path(d), ds, b.name if several else None, bi, offset)
            offset += len(ds.qimlist)
            if bi == 0 and m.name in names:
                raise UserError(f"method {m.name!r} given twice (--descriptors {d})")
            names.add(m.name)
            methods.append(m)
            read_stats[qualify(b.name, m.name, several)] = st
    if not methods:
        raise UserError("give at least one --descriptors DESC/<method> folder")
    return methods, read_stats


def landmark_stats(benchmarks: Sequence, datasets: Sequence, problem: Problem) -> dict[str, Any]:
    """stats.json's account of the landmarks: fingerprint, queries, their grouping (and, with
    several benchmarks, each benchmark's)."""
    several = len(benchmarks) > 1
    with_pos = sum(bool(ds.positives(i)) for ds in datasets for i in range(len(ds.qimlist)))
    n_queries = sum(len(ds.qimlist) for ds in datasets)
    groups = {qualify(b.name, lm, several): [qualify(b.name, q, several) for q in qs]
              for b, ds in zip(benchmarks, datasets) for lm, qs in ds.landmark_queries().items()}
    stats: dict[str, Any] = {
        "landmarks_fingerprint": fingerprint([(b.name, ds.fingerprint()) for b, ds in zip(benchmarks, datasets)]),
        "landmarks_dataset": "+".join(ds.name for ds in datasets),
        "landmarks": problem.landmarks,
        "landmark_queries": groups,  # the grouping found from the ground truth
        "queries": n_queries,
        "queries_with_positives": with_pos,
        "queries_without_positives": n_queries - with_pos,
    }
    if several:
        stats["benchmarks"] = [{"name": b.name, "gnd": b.gnd, "landmarks_fingerprint": ds.fingerprint(),
                                "queries": len(ds.qimlist), "landmarks": len(ds.landmarks)}
                               for b, ds in zip(benchmarks, datasets)]
    return stats
