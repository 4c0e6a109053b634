"""A small scored world for `mining select` (scores, stats, candidates, landmarks; the review
decisions) and a selection of the hostile corpus: used by tests/unit/stages/select/test_select.py and
tests/browser/test_attribution_browser.py."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mining.files.answers import Label, queue_digest
from mining.cli import main
from mining.datasets.landmarks import load_landmarks

LANDMARKS = ["tower", "bridge"]


def make_inputs(tmp_path, n=30, seed=0):
    rng = np.random.default_rng(seed)
    gnd = {"imlist": ["a", "b"], "qimlist": ["tower_001", "bridge_001"],
           "gnd": [{"bbx": [0, 0, 1, 1], "easy": [0], "hard": [], "junk": []},
                   {"bbx": [0, 0, 1, 1], "easy": [1], "hard": [], "junk": []}]}
    (tmp_path / "gnd").mkdir()
    (tmp_path / "gnd" / "gnd_city.pkl").write_bytes(pickle.dumps(gnd))
    fp = load_landmarks(tmp_path / "gnd").fingerprint()
    ids = rng.choice(10**7, n, replace=False).astype(np.int64)
    score = rng.integers(0, 6, n).astype(np.float64) / 2  # many ties
    scores_dir = tmp_path / "scores"
    scores_dir.mkdir()
    pq.write_table(pa.table({"photo_id": ids, "score": score, "score_cnn": score, "closest_landmark": ["tower"] * n,
                             "methods_missing": np.zeros(n, np.int8)}), scores_dir / "scores.parquet")
    (scores_dir / "stats.json").write_text(json.dumps({"landmarks_fingerprint": fp, "landmarks": LANDMARKS}))
    # score's review queue; empty here: the tests that need one write their own
    pq.write_table(pa.table({"landmark": pa.array([], pa.string()), "photo_id": pa.array([], pa.int64())}),
                   scores_dir / "review_queue.parquet")
    pq.write_table(pa.table({
        "photo_id": ids, "server_id": np.full(n, 65535, np.int32), "secret": [f"5e{i}" for i in ids],
        "secret_original": ["o"] * n, "extension": ["jpg"] * n,
        "license_name": ["Attribution License"] * n,
        "license_url": ["http://creativecommons.org/licenses/by/2.0/"] * n,
        "user_nsid": [f"{i}@N00" for i in range(n)], "user_nickname": [f"user|{i}" for i in range(n)],
        "title": [f"photo {i}" for i in range(n)], "page_url": [None] * n,
    }), tmp_path / "candidates.parquet")
    return scores_dir, ids, score


def write_decisions(path, rows, metadata=None, kind="review", queue=None):
    """A decisions file as `mining review export` labels it (mining.files.answers): the answers to a `kind`
    queue over the photos `queue` (default: the rows' photos); `metadata` adds to the label."""
    label = Label(kind, queue_digest([p for _, p, _ in rows] if queue is None else queue))
    schema = pa.schema([("landmark", pa.string()), ("photo_id", pa.int64()), ("rank", pa.int32()),
                        ("votes", pa.string()), ("n_votes", pa.int32()), ("decision", pa.string())],
                       metadata={**label.metadata(), **(metadata or {})})
    table = pa.Table.from_pylist([{"landmark": lm, "photo_id": int(p), "rank": 1, "votes": "{}", "n_votes": 1,
                                   "decision": d} for lm, p, d in rows], schema=schema)
    pq.write_table(table, path)
    return path


def select(tmp_path, scores_dir, decisions, out, *extra):
    return main(["select", "--scores", str(scores_dir), "--decisions", str(decisions), "--candidates",
                 str(tmp_path / "candidates.parquet"), "--out", str(out), *extra])


def expected(ids, score, drop, n):
    order = sorted(((-s, int(p)) for p, s in zip(ids, score) if int(p) not in drop))
    return [p for _, p in order][:n]


def hostile_selection(tmp_path):
    """A selection whose candidates carry the hostile corpus in titles, owners and URLs."""
    from hostile import TEXT, make_hostile

    n = 2 * len(TEXT)
    scores_dir, ids, score = make_inputs(tmp_path, n=n)
    meta = make_hostile(tmp_path / "candidates.parquet")
    dec = write_decisions(tmp_path / "d.parquet", [])
    out = tmp_path / "sel"
    assert select(tmp_path, scores_dir, dec, out, "--n", str(n)) == 0
    return out, expected(ids, score, set(), n), meta
