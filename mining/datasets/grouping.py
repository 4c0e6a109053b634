"""Landmarks come from the ground truth, not from query names: a query's `landmark` key when
present; otherwise queries whose positives (easy ∪ hard, or the original protocol's `ok`) are
the same set, or nearly so (Jaccard ≥ `SAME_LANDMARK_JACCARD`), form one landmark. See
`find_landmarks`.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any, Sequence

import numpy as np

from mining.datasets.gndcheck import GndProblem
from mining.datasets.gndfile import positive_set

# Two queries whose positive sets have a Jaccard index at least this high show the same
# landmark. Queries of one landmark share their positives exactly in the original Oxford and
# Paris ground truth (Jaccard 1.0); different landmarks share almost nothing (the real Oxford
# maximum is 0.003: all_souls and radcliffe_camera have one positive image in common). 0.5
# leaves room for per-query labels (revisitop's Hard depends on the query's view).
SAME_LANDMARK_JACCARD = 0.5
# `check` flags a query when at least this share of its positives are positives of another
# landmark: the grouping (or the file's `landmark` keys) probably split one landmark in two.
OVERLAP_WARNING = 0.2

_TRAILING_NUMBER = re.compile(r"[_\d]+$")


def _stem(name: str) -> str:
    """A query name without its trailing number: `all_souls_000013` → `all_souls`."""
    return _TRAILING_NUMBER.sub("", name)


def _common_prefix(names: Sequence[str]) -> str:
    return _stem(os.path.commonprefix(list(names)))


def _group_label(names: Sequence[str]) -> str:
    """What most of a group's query names say: the stem more than half of them share, else their common prefix."""
    stem, count = Counter(_stem(n) for n in names).most_common(1)[0]
    if stem and count * 2 > len(names):
        return stem
    return _common_prefix(names)


def _jaccard_pairs(sets: Sequence[set[int]]) -> dict[tuple[int, int], float]:
    """|A∩B| / |A∪B| of every pair i < j of sets that share an element, through one sparse
    product (pairs that share nothing have 0 and are left out: memory grows with the pairs
    that overlap, not with the square of the count)."""
    from scipy import sparse

    n = len(sets)
    rows = np.repeat(np.arange(n), [len(s) for s in sets])
    cols = np.fromiter((v for s in sets for v in sorted(s)), np.int64, count=len(rows))
    width = int(cols.max()) + 1 if len(cols) else 1
    a = sparse.csr_matrix((np.ones(len(rows), np.int32), (rows, cols)), shape=(n, width))
    inter = sparse.triu(a @ a.T, k=1).tocoo()
    size = [len(s) for s in sets]
    return {(i, j): v / (size[i] + size[j] - v) for i, j, v in zip(*(x.tolist() for x in (inter.row, inter.col, inter.data))) if v}


def _jaccard(a: set[int], b: set[int]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def find_landmarks(qimlist: Sequence[str], gnd: Sequence[dict[str, Any]],
                   threshold: float = SAME_LANDMARK_JACCARD) -> tuple[list[tuple[str, list[int]]], list[GndProblem]]:
    """Group the queries into landmarks from the ground truth; (groups, warnings about the grouping).

    1. A query with a `landmark` key belongs to that landmark.
    2. The other queries with positives are linked when their positive sets have a Jaccard
       index ≥ `threshold` (single linkage); a linked group joins the explicitly named
       landmark whose positives it matches that well, if any.
    3. A query without positives joins the one group whose queries' names share its name
       stem, if exactly one does; otherwise it is a landmark of its own.

    A found group is named by what its queries' names share (the stem most of them carry,
    `all_souls` for `all_souls_000013`, else their common prefix) when that name is unique
    among the groups, else `landmark_NN` (NN its position). Groups are ordered by their
    first query.
    """
    n = len(qimlist)
    pos = [positive_set(g) for g in gnd]
    explicit = [g.get("landmark") or None for g in gnd]
    link = _Linkage(n)
    first_of: dict[str, int] = {}
    for i, lm in enumerate(explicit):
        if lm is not None:
            link.join(first_of.setdefault(str(lm), i), i)
    jac = _jaccard_pairs(pos) if n else {}
    for (i, j), v in jac.items():
        if v >= threshold and explicit[i] is None and explicit[j] is None:
            link.join(i, j)
    _join_named(link, pos, explicit, threshold)
    _join_by_stem(link, qimlist, pos, explicit)
    ordered = sorted(link.members().values(), key=lambda qs: qs[0])
    groups = list(zip(_group_names(qimlist, explicit, ordered), ordered))
    return groups, _grouping_warnings(qimlist, pos, explicit, groups, jac, threshold)


class _Linkage:
    """Single linkage over the queries 0..n-1 (union-find): a group's root is its smallest member."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def root(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(self, i: int, j: int) -> None:
        ri, rj = self.root(i), self.root(j)
        if ri != rj:
            self.parent[max(ri, rj)] = min(ri, rj)

    def members(self) -> dict[int, list[int]]:
        """Root → its group's queries, in the order of their first query."""
        out: dict[int, list[int]] = {}
        for i in range(len(self.parent)):
            out.setdefault(self.root(i), []).append(i)
        return out


def _join_named(link: _Linkage, pos: Sequence[set[int]], explicit: Sequence[Any], threshold: float) -> None:
    """A found group (no `landmark` key) joins the named landmark whose positives it matches best,
    when their Jaccard index is ≥ `threshold`."""
    named_pos = {r: set().union(*(pos[i] for i in qs)) for r, qs in link.members().items() if explicit[r] is not None}
    holders = _holders(named_pos.items())
    for r, qs in link.members().items():
        if explicit[r] is not None or not pos[r]:
            continue
        union = set().union(*(pos[i] for i in qs))
        shared = Counter(k for v in union for k in holders.get(v, ()))  # named landmarks it overlaps at all
        best = max(shared, key=lambda k: (_jaccard(union, named_pos[k]), -k), default=None)
        if best is not None and _jaccard(union, named_pos[best]) >= threshold:
            link.join(best, r)


def _join_by_stem(link: _Linkage, qimlist: Sequence[str], pos: Sequence[set[int]], explicit: Sequence[Any]) -> None:
    """A query without positives (nor `landmark` key) joins the one group with positives whose
    queries' names carry its name stem, when exactly one does."""
    stems: dict[str, set[int]] = {}  # name stem → the groups with positives whose queries carry it
    for r, qs in link.members().items():
        if any(pos[j] for j in qs):
            for j in qs:
                stems.setdefault(_stem(qimlist[j]), set()).add(r)
    for i in range(len(qimlist)):
        if explicit[i] is not None or pos[i]:
            continue
        claim = [r for r in stems.get(_stem(qimlist[i]), ()) if r != link.root(i)]
        if len(claim) == 1 and _stem(qimlist[i]):
            link.join(claim[0], i)


def _group_names(qimlist: Sequence[str], explicit: Sequence[Any], ordered: Sequence[list[int]]) -> list[str]:
    """Each group's name: its `landmark` key; else the label its queries' names share
    (`_group_label`) when no other group has it; else `landmark_NN` (NN its position)."""
    given = [next((str(explicit[i]) for i in qs if explicit[i] is not None), None) for qs in ordered]
    labels = [g if g is not None else _group_label([qimlist[i] for i in qs]) for g, qs in zip(given, ordered)]
    taken = Counter(labels)
    reserved = {g for g in given if g is not None}
    width = max(2, len(str(len(ordered))))
    names = []
    for k, (g, lab) in enumerate(zip(given, labels)):
        if g is not None or (lab and taken[lab] == 1 and lab not in reserved):
            names.append(lab)
        else:
            names.append(f"landmark_{k + 1:0{width}d}")
    return names

def _grouping_warnings(qimlist: Sequence[str], pos: Sequence[set[int]], explicit: Sequence[Any],
                       groups: list[tuple[str, list[int]]], jac: dict[tuple[int, int], float],
                       threshold: float) -> list[GndProblem]:
    out = []
    holders = _holders(enumerate(set().union(*(pos[i] for i in qs)) for _, qs in groups))
    for g, (name, qs) in enumerate(groups):
        for i in qs:
            q = qimlist[i]
            if not pos[i]:
                out.append(GndProblem("warning", f"query {q!r} has no positives (no easy, hard or ok image): "
                                      "it cannot count in the score or the evaluation", q, "easy"))
                continue
            shared = Counter(k for v in pos[i] for k in holders[v])  # other landmarks' positives it holds
            for k in sorted(shared):
                if k != g and shared[k] >= OVERLAP_WARNING * len(pos[i]):
                    out.append(GndProblem("warning", f"query {q!r} (landmark {name!r}): {shared[k]} of its "
                                          f"{len(pos[i])} positives are positives of landmark {groups[k][0]!r}; one "
                                          "landmark split in two?", q, "landmark" if explicit[i] is not None else None))
            best = max((jac.get((min(i, j), max(i, j)), 0.0) for j in qs if j != i and pos[j]), default=None)
            if explicit[i] is not None and best is not None and best < threshold:
                out.append(GndProblem("warning", f"query {q!r} is labelled {name!r} but its positives share little with "
                                      f"the other queries of {name!r} (best Jaccard {best:.2f})", q, "landmark"))
    return out


def _holders(sets: Any) -> dict[int, list[int]]:
    """Image → the keys of the (key, set of images) pairs whose set holds it."""
    out: dict[int, list[int]] = {}
    for k, v in ((k, v) for k, images in sets for v in images):
        out.setdefault(v, []).append(k)
    return out
