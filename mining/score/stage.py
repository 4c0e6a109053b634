"""`mining score` as a stage: descriptor stores (read through `mining.retrieval`) → the
loop's inputs → `score_candidates` → the output files."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from mining.errors import UserError
from mining.score.inputs import CandidateVectors, MethodInput, Problem
from mining.score.loop import DEFAULT_CHUNK, DEFAULT_REVIEW_TOP, score_candidates
from mining.score.output import write_outputs


def method_from_stores(method_dir: Path, dataset) -> tuple[MethodInput, dict]:
    """Read DESC/<method>/{queries,database,candidates} into a MethodInput (+ its stats)."""
    from mining.descriptors import similarity_function
    from mining.retrieval import open_method

    stores = open_method(method_dir)
    landmark = stores.landmark_similarities(dataset)
    positive_sims, positives_missing = landmark.positives(dataset)
    missing_queries = sorted(set(range(len(dataset.qimlist))) - set(landmark.query_index.tolist()))
    ids = stores.candidate_ids()
    q_store, c_store = stores.queries, stores.candidates
    sim = similarity_function(q_store, c_store)
    _, q_payload = q_store.load_all()
    is_global = stores.is_global

    def blocks() -> Iterator[np.ndarray | CandidateVectors]:
        for _, payload in c_store.iter_blocks():
            # global descriptors: the loop multiplies them itself, fused with the counting
            yield CandidateVectors(payload) if is_global else np.asarray(sim(q_payload, payload), dtype=np.float32)

    stats = {"queries_without_descriptor": [dataset.qimlist[i] for i in missing_queries],
             "positives_without_descriptor": int(positives_missing)}
    return MethodInput(stores.name, landmark.query_index, positive_sims, ids, blocks,
                       q_payload if is_global else None), stats


def run_score(landmarks: Path, descriptors: Sequence[Path], out: Path, review_top: int = DEFAULT_REVIEW_TOP,
              chunk: int = DEFAULT_CHUNK, progress: bool = True, threads: int | None = None,
              near_duplicates: Path | None = None) -> dict:
    """`mining score`: stores → scores.parquet, review_queue.parquet, stats.json."""
    from mining.landmarks import load_landmarks

    if review_top < 1:
        raise UserError("--review-top must be at least 1")
    dataset = load_landmarks(landmarks)
    t0 = time.perf_counter()
    inputs, read_stats = [], {}
    for d in descriptors:
        m, st = method_from_stores(Path(d), dataset)
        if m.name in read_stats:
            raise UserError(f"method {m.name!r} given twice (--descriptors {d})")
        inputs.append(m)
        read_stats[m.name] = st
    if not inputs:
        raise UserError("give at least one --descriptors DESC/<method> folder")
    problem = Problem(list(dataset.qimlist), [dataset.query_landmark(i) for i in range(len(dataset.qimlist))],
                      dataset.landmarks)
    t_read = time.perf_counter() - t0
    result = score_candidates(problem, inputs, chunk=chunk, review_top=review_top, progress=progress,
                              threads=threads)
    for name, st in read_stats.items():
        result.stats["methods"][name].update(st)
    has_pos = [i for i in range(len(dataset.qimlist)) if dataset.positives(i)]
    result.stats.update({
        "landmarks_fingerprint": dataset.fingerprint(),
        "landmarks_dataset": dataset.name,
        "landmarks": problem.landmarks,
        "landmark_queries": dataset.landmark_queries(),  # the grouping found from the ground truth
        "queries": len(dataset.qimlist),
        "queries_with_positives": len(has_pos),
        "queries_without_positives": len(dataset.qimlist) - len(has_pos),
    })
    result.stats["seconds"]["read_landmark_descriptors"] = round(t_read, 3)
    write_outputs(result, problem, out, near_duplicates)
    return result.stats
