"""What the score loop is given: per method its similarity rows, positives and candidate
blocks (`MethodInput`), and the dataset's queries and landmarks (`Problem`). A method's blocks
are either similarities or, for global descriptors, the candidate vectors themselves
(`CandidateVectors`), which the loop multiplies in cache-sized pieces (`mining.stages.score.alignment`).
`mining.stages.score.stage` builds them from descriptor stores; tests and benchmarks build them directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np


@dataclass
class CandidateVectors:
    """A block of candidate descriptors (n × dim, float16 as stores keep them, or float32)
    whose similarities are `vectors @ query_vectors.T`. The score loop computes them itself,
    in cache-sized pieces, each decoded, multiplied and counted by one thread while it is
    still in cache: the fast path for global descriptors."""

    vectors: np.ndarray


@dataclass
class MethodInput:
    """One method's view of the problem: which dataset queries its similarity rows are,
    their positives' similarities, the candidate ids in block order, and the blocks: either
    float32 similarity blocks (n_rows, n_block) or `CandidateVectors` (then `query_vectors`,
    (n_rows, dim), gives the rows)."""

    name: str
    query_index: np.ndarray  # int, for each similarity row: the dataset query index
    positive_sims: list[np.ndarray]  # per similarity row: similarities to that query's positives
    ids: np.ndarray  # int64 candidate ids, in the order the blocks deliver them
    blocks: Callable[[], Iterator["np.ndarray | CandidateVectors"]]
    query_vectors: np.ndarray | None = None
    benchmark: int = 0  # index into Problem.benchmarks: the benchmark whose queries its rows are


@dataclass
class Problem:
    """Everything the scoring loop needs besides the methods. With several benchmarks the
    queries and landmarks are all of theirs (names `<benchmark>/<name>`), and a method comes
    once per benchmark (`MethodInput.benchmark`, its query_index into these queries)."""

    query_names: list[str]
    query_landmark: list[str]  # per dataset query
    landmarks: list[str]  # distinct landmark names, first-appearance order
    benchmarks: list[str] = field(default_factory=lambda: [""])  # one unnamed benchmark by default
