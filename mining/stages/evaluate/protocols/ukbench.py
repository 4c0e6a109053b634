"""UKBench: the 4-score (how many of the query's object's 4 images are in its top 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from mining.errors import UserError
from mining.stages.evaluate.protocols.ranking import index_ranks, names_of, rows_of
from mining.stages.evaluate.protocols.readers import Results, image_names, name_number, read_name_list, read_ranked_lists


def ukbench_objects(images: Iterable[str]) -> dict[str, int]:
    """Image name → object (`ukbenchNNNNN.jpg` shows object NNNNN // 4), every object with 4 images."""
    obj = {n: name_number(n, r"ukbench(\d+)", "ukbench00000.jpg") // 4 for n in images}
    sizes: dict[int, int] = {}
    for o in obj.values():
        sizes[o] = sizes.get(o, 0) + 1
    bad = sorted(o for o, s in sizes.items() if s != 4)
    if bad:
        raise UserError(f"UKBench object {bad[0]} has {sizes[bad[0]]} images (each object has 4: "
                        "ukbench{4k..4k+3}.jpg)")
    return obj


def ukbench_counts(results: Mapping[str, Sequence[str]], obj: Mapping[str, int]) -> dict[str, int]:
    """Per query image: how many of its object's 4 images (itself included) are in its top 4."""
    images = list(obj)
    missing = [q for q in images if q not in results]
    if missing:
        raise UserError(f"results omit {len(missing)} of {len(images)} queries (e.g. {missing[0]!r})")
    out = {}
    for q in images:
        top = list(dict.fromkeys(results[q]))[:4]
        if len(top) < 4:
            raise UserError(f"query {q!r}: {len(top)} results, the score needs the top 4")
        unknown = [n for n in top if n not in obj]
        if unknown:
            raise UserError(f"query {q!r}: {unknown[0]!r} is not a UKBench image of the ground truth")
        out[q] = sum(obj[n] == obj[q] for n in top)
    return out


def evaluate(gt: Path, res: Results, setups: Sequence[str] = ()) -> dict[str, Any]:
    obj = ukbench_objects(image_names(gt))
    images = sorted(obj, key=lambda n: name_number(n, r"ukbench(\d+)", "ukbench00000.jpg"))
    if res.ranks is not None and res.ranks.suffix != ".npy":
        results = read_ranked_lists(res.ranks)
    else:
        dbnames = read_name_list(res.imlist, "image list") if res.imlist else images
        qnames = read_name_list(res.qimlist, "query list") if res.qimlist else images
        rows = rows_of(qnames, dbnames) if res.queries is None else None
        results = names_of(index_ranks(res, qnames, len(dbnames), 4, rows), qnames, dbnames, res.ranks)
    counts = ukbench_counts(results, {n: obj[n] for n in images})
    return {"variant": "ukbench", "queries": len(images), "metrics": {"ukbench": {"4-score": float(np.mean(list(counts.values())))}},
            "per_query": {"ukbench": counts}}
