"""Oxford/Paris: the revisited protocol (a gnd file; Easy, Medium, Hard) and the original one
(a gt_files folder of `<query>_{good,ok,junk,query}.txt`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from mining.errors import UserError
from mining.stages.evaluate.protocols.ranking import index_ranks, names_of
from mining.stages.evaluate.protocols.readers import Results, read_name_list, read_ranked_lists
from mining.stages.evaluate.protocols.report import finite_or_none
from mining.stages.evaluate.protocols.setups import KAPPAS, SETUPS, setup_gnd
from mining.datasets.landmarks import load_gnd
from mining.retrieval.metrics import compute_map


@dataclass(frozen=True)
class OxfordQuery:
    """One query of the original Oxford/Paris protocol (gt_files folder)."""

    name: str  # e.g. all_souls_1
    image: str  # e.g. all_souls_000013 (the `oxc1_` prefix removed)
    bbox: tuple[float, float, float, float]
    good: frozenset[str]
    ok: frozenset[str]
    junk: frozenset[str]

    @property
    def positives(self) -> frozenset[str]:
        return self.good | self.ok


def _names(path: Path) -> frozenset[str]:
    if not path.is_file():
        raise UserError(f"{path}: missing (each query needs _good, _ok, _junk and _query files)")
    return frozenset(line.strip() for line in path.read_text().splitlines() if line.strip())


def load_oxford_gt(folder: str | Path) -> list[OxfordQuery]:
    """All queries of a `<query>_{good,ok,junk,query}.txt` folder, sorted by name."""
    root = Path(folder)
    files = sorted(root.glob("*_query.txt"))
    if not files:
        raise UserError(f"{root}: no *_query.txt files (expected the original Oxford gt_files)")
    out = []
    for f in files:
        name = f.name[: -len("_query.txt")]
        parts = f.read_text().split()
        if len(parts) != 5:
            raise UserError(f"{f}: expected `oxc1_<image> x1 y1 x2 y2`, got {' '.join(parts)!r}")
        try:
            bbox = tuple(float(v) for v in parts[1:])
        except ValueError:
            raise UserError(f"{f}: bbox values are not numbers: {' '.join(parts[1:])!r}") from None
        image = re.sub(r"^oxc1_", "", parts[0])
        out.append(OxfordQuery(name, image, bbox,  # type: ignore[arg-type]
                               _names(root / f"{name}_good.txt"), _names(root / f"{name}_ok.txt"),
                               _names(root / f"{name}_junk.txt")))
    return out


def oxford_gnd(queries: Sequence[OxfordQuery], imlist: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """revisitop-style `{'ok', 'junk'}` indices into imlist (good ∪ ok positive, junk ignored)."""
    index = {n: i for i, n in enumerate(imlist)}
    out = []
    for q in queries:
        unknown = sorted((q.positives | q.junk) - index.keys())
        if unknown:
            raise UserError(f"{q.name}: {len(unknown)} ground-truth images are not in the image list (e.g. {unknown[0]!r})")
        out.append({"ok": np.array(sorted(index[n] for n in q.positives), np.int64),
                    "junk": np.array(sorted(index[n] for n in q.junk - q.positives), np.int64)})
    return out


def oxford_map(queries: Sequence[OxfordQuery], ranked: Mapping[str, Sequence[str]]) -> tuple[float, dict[str, float]]:
    """Original-protocol mAP from ranked image names per query name; a missing query is refused."""
    missing = [q.name for q in queries if q.name not in ranked]
    if missing:
        raise UserError(f"results omit {len(missing)} queries (e.g. {missing[0]!r})")
    aps = {}
    for q in queries:
        names = list(dict.fromkeys(ranked[q.name]))  # a name returned twice takes its first rank
        imlist = sorted(set(names) | q.positives | q.junk)
        index = {n: i for i, n in enumerate(imlist)}
        ranks = np.array([index[n] for n in names], np.int64)[:, None]
        _, ap, _, _ = compute_map(ranks, oxford_gnd([q], imlist))
        aps[q.name] = float(ap[0])
    return float(np.mean(list(aps.values()))), aps


def evaluate(gt: Path, res: Results, setups: Sequence[str] = SETUPS) -> dict[str, Any]:
    if gt.is_dir() and any(gt.glob("*_query.txt")):
        return _evaluate_original(gt, res)
    if res.imlist is not None or res.qimlist is not None:
        raise UserError("--imlist/--qimlist are not used with a gnd file: it holds its own imlist and qimlist")
    data = load_gnd(gt)
    qnames, imlist = list(data["qimlist"]), list(data["imlist"])
    if res.ranks is not None and res.ranks.suffix != ".npy":
        raise UserError(f"{res.ranks}: with a gnd file, ranks are a .npy (revisitop's layout)")
    ranks = index_ranks(res, qnames, len(imlist), None, distractors=True)
    metrics, per_query = {}, {}
    for setup in setups:
        m, aps, pr, _ = compute_map(ranks, setup_gnd(data["gnd"], setup), KAPPAS)
        metrics[setup] = {"mAP": finite_or_none(m), **{f"mP@{k}": finite_or_none(float(p)) for k, p in zip(KAPPAS, pr)}}
        per_query[setup] = {q: finite_or_none(float(a)) for q, a in zip(qnames, aps)}
    return {"variant": "revisited", "queries": len(qnames), "images": len(imlist), "metrics": metrics,
            "per_query": per_query}


def _evaluate_original(gt: Path, res: Results) -> dict[str, Any]:
    queries = load_oxford_gt(gt)
    if res.ranks is not None and res.ranks.suffix != ".npy":
        ranked = read_ranked_lists(res.ranks)
    else:
        if res.imlist is None:
            raise UserError("--imlist (database image names, one a line, in index order) is needed "
                            "with .npy ranks or descriptors and an original gt_files folder")
        dbnames = read_name_list(res.imlist, "image list")
        qnames = read_name_list(res.qimlist, "query list") if res.qimlist else [q.name for q in queries]
        ranked = names_of(index_ranks(res, qnames, len(dbnames), None), qnames, dbnames, res.ranks)
    m, aps = oxford_map(queries, ranked)
    return {"variant": "original", "queries": len(queries), "metrics": {"original": {"mAP": m}},
            "per_query": {"original": aps}}
