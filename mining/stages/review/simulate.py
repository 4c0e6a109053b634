"""The demo's simulated reviewers: answer from the demo world's truth, through the real HTTP API.

They go through the same server and endpoints as people do (a real uvicorn on a free
loopback port), so the demo workflow exercises the app end to end without a human.

Answer rule (default `--match any`): y when the image shows ANY landmark of the benchmark,
not only the one it is queued under. R1M removed every image showing any landmark, because a
distractor that shows landmark B is a false negative for B's queries whichever list it was
found in. `--match same` answers y only for the queued landmark itself.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq

from mining.errors import UserError
from mining.console.progress import bar as progress_bar
from mining.stages.review.hosting import running

PAGE = 500


def load_truth(path: str | Path) -> dict[int, tuple[str, str | None]]:
    """photo_id → (kind, landmark) from the demo's truth.parquet."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: truth file not found")
    table = pq.read_table(p)
    missing = [c for c in ("photo_id", "kind", "landmark") if c not in table.column_names]
    if missing:
        raise UserError(f"{p}: truth lacks column(s) {', '.join(missing)}")
    ids, kinds, lms = (table.column(c).to_pylist() for c in ("photo_id", "kind", "landmark"))
    return {int(i): (str(k), None if lm is None else str(lm)) for i, k, lm in zip(ids, kinds, lms)}


def true_vote(truth: dict[int, tuple[str, str | None]], photo_id: int, landmark: str, match: str) -> str:
    """The correct answer for one queued item; photos missing from the truth are `u`."""
    if photo_id not in truth:
        return "u"
    kind, lm = truth[photo_id]
    if kind != "landmark":
        return "n"
    return "y" if match == "any" or lm == landmark else "n"


def simulate(*, app: Any, truth: dict[int, tuple[str, str | None]], reviewers: int = 3,
             error_rate: float = 0.0, seed: int = 0, match: str = "any",
             progress: bool = True) -> dict[str, Any]:
    """Every simulated reviewer votes on every item it has not voted on yet; returns counts."""
    if reviewers < 1:
        raise UserError("--reviewers must be at least 1")
    if not 0.0 <= error_rate <= 1.0:
        raise UserError("--error-rate must be between 0 and 1")
    if match not in ("any", "same"):
        raise UserError("--match must be 'any' or 'same'")
    if not app.state.settings.access.open:  # a token names its one reviewer; these need several
        raise UserError("simulated reviewers vote under their own names: serve the app without tokens")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per vote drowns the bar
    rng = random.Random(seed)
    posted: Counter[str] = Counter()
    missing = 0
    with running(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        landmarks = _get(client, "/api/landmarks")["landmarks"]
        total = sum(lm["total"] for lm in landmarks) * reviewers
        bar = progress_bar(total=total, desc="simulated review", unit="vote", disable=not progress)
        for r in range(reviewers):
            name = f"simulated-{r + 1}"
            for lm in landmarks:
                offset = 0
                while offset < lm["total"]:
                    page = _get(client, "/api/items", landmark=lm["landmark"], offset=offset,
                                limit=PAGE, reviewer=name)
                    for item in page["items"]:
                        bar.update(1)
                        if item["vote"] is not None:
                            continue  # resumable: keep what this reviewer already said
                        pid = int(item["photo_id"])
                        missing += pid not in truth
                        v = true_vote(truth, pid, lm["landmark"], match)
                        if error_rate and rng.random() < error_rate:
                            v = rng.choice([x for x in ("y", "n", "u") if x != v])
                        resp = client.post("/api/votes", json={"item_id": item["id"], "vote": v,
                                                               "reviewer": name})
                        resp.raise_for_status()
                        posted[v] += 1
                    offset += len(page["items"]) or lm["total"]
        bar.close()
    return {"reviewers": reviewers, "votes_posted": sum(posted.values()), "by_vote": dict(posted),
            "not_in_truth": missing}


def _get(client: Any, path: str, **params: Any) -> dict[str, Any]:
    resp = client.get(path, params=params)
    resp.raise_for_status()
    return resp.json()
