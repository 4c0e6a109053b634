"""A selection, its leak audit and answered review databases, built without a demo run: for the
tests of the audit's answers, `mining review import` and the release gate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image
from scenes import scene

from mining.cli import main
from mining.settings.layout import image_relpath
from mining.stages.review import decisions, queue_import, vote_log
from mining.stages.review.database import connect

BY = ("Attribution License", "http://creativecommons.org/licenses/by/2.0/")


def selection(root: Path, n: int, seed: int = 0, images: bool = False, licence: tuple[str, str] = BY) -> tuple[Path, np.ndarray]:
    """ROOT/selected/distractors.parquet of `n` photos (select's columns); with `images`, their JPEGs
    under ROOT/images."""
    ids = np.random.default_rng(seed).choice(10**7, n, replace=False).astype(np.int64)
    sel = root / "selected"
    sel.mkdir(parents=True)
    frame = pd.DataFrame({"rank": np.arange(1, n + 1), "photo_id": ids, "path": [image_relpath(int(i)) for i in ids],
                          "score": np.linspace(10, 1, n), "closest_landmark": ["tower"] * n,
                          "license_name": licence[0], "license_url": licence[1], "user_nsid": "x@N00"})
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sel / "distractors.parquet")
    (root / "images").mkdir(exist_ok=True)
    for i in ids if images else ():
        path = root / "images" / image_relpath(int(i))
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(scene(int(i), 64, 48)).save(path, "JPEG")
    return sel, ids


def draw(sel: Path, out: Path, *extra: str) -> list[int]:
    """`mining audit draw`; the sampled photo ids."""
    assert main(["audit", "draw", "--selected", str(sel), "--out", str(out), *extra]) == 0
    return [p for s in json.loads((out / "plan.json").read_text())["sampled_ids"] for p in s]


def review_queue(path: Path, ids, landmark: str = "tower") -> Path:
    """A main review queue over `ids`, as `mining score` writes it."""
    ids = [int(i) for i in ids]
    pq.write_table(pa.table({"landmark": [landmark] * len(ids), "photo_id": pa.array(ids, pa.int64()),
                             "rank": pa.array(range(1, len(ids) + 1), pa.int32()),
                             "score": [1.0] * len(ids), "total_score": [2.0] * len(ids),
                             "best_query": [f"{landmark}_001"] * len(ids)}), path)
    return path


def answer(queue: Path, database: Path, out: Path, votes: dict[int, str] | None = None, default: str = "n") -> Path:
    """Import `queue` into `database`, answer every item (`votes` by photo id, else `default`) and
    export the answers to `out` (`mining review export`)."""
    votes = votes or {}
    con = connect(database, create=True)
    try:
        queue_import.import_queue(con, queue, scores_fingerprint=None)
        for item, pid in con.execute("SELECT id, photo_id FROM items ORDER BY id").fetchall():
            vote_log.vote(con, int(item), "ann", votes.get(int(pid), default))
        decisions.export(con, out)
    finally:
        con.close()
    return out


def estimate(sel: Path, audit: Path, answers: Path, out: Path | None = None) -> int:
    """`mining audit estimate` into `out` (default: the audit folder); its exit code."""
    return main(["audit", "estimate", "--selected", str(sel), "--decisions", str(answers), "--audit", str(audit),
                 "--out", str(out or audit)])


def audited_with_leaks(root: Path, n: int = 400, leaks: int = 5) -> tuple[Path, Path, dict]:
    """A stratified audit of `n` images whose answers found `leaks` landmark images (5 of 400:
    a bound far above a 1 % target): (selection, audit folder, its honest audit.json)."""
    sel, _ = selection(root, n, images=True)
    audit = root / "audit"
    sampled = draw(sel, audit)
    answers = answer(audit / "audit_queue.parquet", audit / "audit.sqlite", audit / "decisions.parquet",
                     votes={p: "y" for p in sampled[:leaks]})
    assert estimate(sel, audit, answers) == 0
    return sel, audit, json.loads((audit / "audit.json").read_text())


def forged(folder: Path, audit: Path, content: dict) -> Path:
    """FOLDER/audit.json with `content`, beside a copy of the audit's own plan and answers (what
    `mining release` checks its counts against): an edit of audit.json alone, as someone with write
    access to the run would make it."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("plan.json", "decisions.parquet"):
        shutil.copyfile(audit / name, folder / name)
    (folder / "audit.json").write_text(json.dumps(content).replace("1e999", "Infinity"))
    return folder / "audit.json"
