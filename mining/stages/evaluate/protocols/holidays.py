"""INRIA Holidays: groups from the image names (`GGGGNN.jpg`), mAP with the query itself ignored."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from mining.errors import UserError
from mining.stages.evaluate.protocols.ranking import index_ranks, names_of, rows_of
from mining.stages.evaluate.protocols.readers import Results, image_names, name_number, read_name_list, read_text
from mining.stages.evaluate.protocols.report import finite_or_none
from mining.retrieval.metrics import compute_ap


def holidays_groups(images: Iterable[str]) -> dict[str, list[str]]:
    """Query image → its positives: images `GGGGNN.jpg` share group GGGG; the first is the query."""
    groups: dict[int, list[str]] = {}
    for name in images:
        stem = Path(name).stem
        if not stem.isdigit():
            raise UserError(f"{name}: Holidays image names are numbers like 100000.jpg")
        groups.setdefault(int(stem) // 100, []).append(name)
    out = {}
    for members in groups.values():
        members = sorted(members, key=lambda n: int(Path(n).stem))
        out[members[0]] = members[1:]
    return out


def read_holidays_results(path: str | Path) -> dict[str, list[str]]:
    """Holidays result file: `query.jpg rank1 image1 rank2 image2 ...` per line, ranks 0-based."""
    out = {}
    for n, line in enumerate(read_text(Path(path)).splitlines(), 1):
        toks = line.split()
        if not toks:
            continue
        if len(toks) % 2 != 1 or not all(t.isdigit() for t in toks[1::2]):
            raise UserError(f"{path}:{n}: expected `query rank image rank image ...` (ranks 0, 1, 2, ...)")
        if toks[0] in out:
            raise UserError(f"{path}:{n}: query {toks[0]!r} has a second line")
        pairs = sorted(((int(toks[i]), toks[i + 1]) for i in range(1, len(toks), 2)), key=lambda t: t[0])
        out[toks[0]] = [name for _, name in pairs]
    if not out:
        raise UserError(f"{path}: empty (expected `query rank image rank image ...` lines)")
    return out


def holidays_map(results: Mapping[str, Sequence[str]], groups: Mapping[str, Sequence[str]]) -> float:
    """Holidays mAP: the query itself is ignored if returned; a result set omitting a query is refused."""
    missing = [q for q in groups if q not in results]
    if missing:
        raise UserError(f"results omit {len(missing)} of {len(groups)} queries (e.g. {missing[0]!r})")
    aps = []
    for q, positives in groups.items():
        names = [n for n in dict.fromkeys(results[q]) if n != q]
        pos = set(positives)
        ranks = np.flatnonzero([n in pos for n in names])
        aps.append(compute_ap(ranks, len(pos)) if pos else float("nan"))
    valid = [a for a in aps if np.isfinite(a)]
    return float(np.mean(valid)) if valid else float("nan")


def evaluate(gt: Path, res: Results, setups: Sequence[str] = ()) -> dict[str, Any]:
    images = sorted(image_names(gt), key=lambda n: name_number(n, r"(\d+)", "100000.jpg"))
    groups = holidays_groups(images)
    if res.ranks is not None and res.ranks.suffix != ".npy":
        results = read_holidays_results(res.ranks)
    else:
        dbnames = read_name_list(res.imlist, "image list") if res.imlist else images
        qnames = read_name_list(res.qimlist, "query list") if res.qimlist else list(groups)
        rows = rows_of(qnames, dbnames) if res.queries is None else None
        results = names_of(index_ranks(res, qnames, len(dbnames), None, rows), qnames, dbnames, res.ranks)
    return {"variant": "holidays", "queries": len(groups), "images": len(images),
            "metrics": {"holidays": {"mAP": finite_or_none(holidays_map(results, groups))}}}
