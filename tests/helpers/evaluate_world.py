"""The evaluation tests' small world (6 queries, 2 global methods, 240 candidates with exact ties),
its inputs (scores, decisions, a selection) and revisitop's loop over an explicit ranking: what the
evaluate, kit, report, choose_n, leakrisk and since tests build on."""

import json
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from oracle import compute_map_loop

from mining.datasets.landmarks import load_landmarks
from mining.files.answers import Label, queue_digest
from mining.retrieval.descriptors import iter_similarities, open_store, write_global_shard, write_store_info
from mining.stages.evaluate.histograms import load_method
from mining.stages.evaluate.protocols.setups import setup_gnd

DIM = 16


def _unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _store(path, method, set_, ids, vecs, shard_size=50):
    write_store_info(path, {"method": method, "kind": "global", "set": set_, "dim": DIM})
    for s in range(0, len(ids), shard_size):
        write_global_shard(path, f"{s // shard_size:05d}", ids[s : s + shard_size], vecs[s : s + shard_size])


def build_world(root):
    """Landmarks (6 queries, one without positives), 2 methods, 240 candidates incl. exact ties."""
    rng = np.random.default_rng(7)
    ndb, nq, ncand = 60, 6, 240
    imlist = [f"db_{i:03d}" for i in range(ndb)]
    qimlist = [f"lm{q % 3}_{q:03d}" for q in range(nq)]
    gnd = []
    for q in range(nq):
        items = rng.permutation(ndb)
        if q == 5:
            gnd.append({"bbx": [0, 0, 5, 5], "easy": [], "hard": [], "junk": items[:3].tolist(), "landmark": f"lm{q % 3}"})
            continue
        # random positives per query: the landmark comes from the file's `landmark` key
        gnd.append({"bbx": [0, 0, 5, 5], "easy": items[:5].tolist(), "hard": items[5:11].tolist(), "junk": items[11:15].tolist(),
                    "landmark": f"lm{q % 3}"})
    (root / "lm").mkdir(parents=True)
    (root / "lm" / "gnd_city.pkl").write_bytes(pickle.dumps({"imlist": imlist, "qimlist": qimlist, "gnd": gnd}))
    cand_ids = [str(1000 + 7 * i) for i in range(ncand)]
    for method, seed in (("gem", 1), ("sift", 2)):
        r = np.random.default_rng(seed)
        centres = _unit(r.normal(size=(3, DIM)))
        qv = _unit(centres[[q % 3 for q in range(nq)]] + 0.3 * r.normal(size=(nq, DIM)))
        dbv = _unit(centres[r.integers(0, 3, ndb)] + 0.8 * r.normal(size=(ndb, DIM)))
        for q in range(5):  # positives close to their query
            for p in gnd[q]["easy"] + gnd[q]["hard"]:
                dbv[p] = _unit(qv[q][None] + 0.9 * r.normal(size=(1, DIM)))[0]
        cv = _unit(centres[r.integers(0, 3, ncand)] + 0.9 * r.normal(size=(ncand, DIM)))
        cv[:10] = dbv[gnd[0]["easy"][0]]  # exact ties with a positive: the landmark image must rank first
        keep_db = [i for i in r.permutation(ndb) if i != gnd[1]["hard"][0]]  # one positive never described
        d = root / "desc" / method
        _store(d / "queries", method, "queries", qimlist, qv)
        _store(d / "database", method, "database", [imlist[i] for i in keep_db], dbv[keep_db], shard_size=25)
        _store(d / "candidates", method, "candidates", cand_ids, cv)
    return root


def brute_force(method_dir, ds, photo_ids, setup):
    """Rank database + distractors for every query with a stable sort; revisitop's loop."""
    q_store, db_store, c_store = (open_store(method_dir / p) for p in ("queries", "database", "candidates"))
    ndb = len(ds.imlist)
    sims = np.full((len(ds.qimlist), ndb), -np.inf, np.float32)
    present = np.zeros(ndb, bool)
    for ids, s in iter_similarities(q_store, db_store):
        idx = [ds.imlist.index(i) for i in ids]
        sims[:, idx] = s
        present[idx] = True
    cand = {}
    for ids, s in iter_similarities(q_store, c_store):
        for j, i in enumerate(ids):
            cand[int(i)] = s[:, j]
    dsims = np.stack([cand[int(p)] for p in photo_ids], axis=1) if len(photo_ids) else np.zeros((len(ds.qimlist), 0), np.float32)
    keys = np.concatenate([np.flatnonzero(present), ndb + np.arange(len(photo_ids))])
    allsims = np.concatenate([sims[:, present], dsims], axis=1)
    ranks = keys[np.argsort(-allsims, axis=1, kind="stable")].T
    return compute_map_loop(ranks, setup_gnd(ds.gnd, setup), [1, 5, 10])


def run_inputs(world, tmp_path):
    """Scores that really measure distraction (positives beaten), a selection and decisions."""
    ds = load_landmarks(world / "lm")
    per_method = {}
    for method in ("gem", "sift"):
        md = load_method(world / "desc" / method, ds, [])
        stores = [open_store(world / "desc" / method / p) for p in ("queries", "candidates")]
        rows = [ds.qimlist.index(i) for i in stores[0].ids()]
        for ids, sims in iter_similarities(*stores):
            score = np.zeros(len(ids))
            for r, q in enumerate(rows):
                t = md.thresholds[q]
                if t.size:
                    score += np.searchsorted(t, sims[r], side="left").astype(float) / t.size
            per_method[method] = {**per_method.get(method, {}), **dict(zip(map(int, ids), score))}
    ids = np.array(sorted(per_method["gem"]), np.int64)
    cols = {f"score_{m}": np.array([per_method[m][i] for i in ids]) for m in per_method}
    total = sum(cols.values())
    scores = tmp_path / "scores"
    scores.mkdir()
    pq.write_table(pa.table({"photo_id": ids, "score": total, **cols}), scores / "scores.parquet")
    (scores / "stats.json").write_text(json.dumps({"landmarks_fingerprint": ds.fingerprint()}))
    landmark_ids = ids[np.argsort(-total)][:3]  # the three best-scoring ones "show a landmark"
    answered = np.append(landmark_ids, ids[-1])  # the review's answers, labelled as its export is (mining.files.answers)
    pq.write_table(pa.table({"landmark": ["lm0"] * 4, "photo_id": answered,
                             "decision": ["landmark"] * 3 + ["not_landmark"]}).replace_schema_metadata(
        Label("review", queue_digest(answered)).metadata()), tmp_path / "decisions.parquet")
    pq.write_table(pa.table({"landmark": ["lm0"] * 4, "photo_id": answered}), scores / "review_queue.parquet")
    keep = ~np.isin(ids, landmark_ids)
    order = np.lexsort((ids[keep], -total[keep]))[:40]
    sel = tmp_path / "selected"
    sel.mkdir()
    pq.write_table(pa.table({"photo_id": ids[keep][order], "score": total[keep][order]}), sel / "distractors.parquet")
    return ds, ids, landmark_ids, ids[keep][order]
