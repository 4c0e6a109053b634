"""The cascade (mining/stages/cascade/stage.py): the shortlist, the below-positive scores and the
check are equal to brute forces written here over the evaluation world's stores (6 queries over 3
landmarks, one query without positives, 240 candidates with exact ties); describe keeps only the
listed candidates; the manifest's `cascade:` section is checked; the evaluation marks cascaded
rows; the workflow plans the cascade's jobs only with a cascade."""

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from evaluate_world import DIM, build_world
from snakerun import snakemake

from mining.datasets.benchmarks import as_list, load_all
from mining.errors import UserError
from mining.files.tables import load_shortlist
from mining.publishing.result import row_label
from mining.retrieval.descriptors import iter_similarities, open_store, write_global_shard, write_store_info
from mining.settings import manifest
from mining.settings.options import CascadeOptions
from mining.stages.cascade.stage import below_positive_scores, run_check, run_shortlist
from mining.stages.describe.stage import ImageItem, on_shortlist
from mining.stages.evaluate.stage import cascaded_methods

from paths import ROOT as REPO

NCAND = 240


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("cascade"))


def _gnd(world):
    return str(world / "lm" / "gnd_city.pkl")


def _options(**kw):
    base = dict(methods=["sift"], by=["gem"], shortlist=5, check=40, max_missed=1.0, confidence=0.95, seed=0)
    return CascadeOptions(**{**base, **kw})


# ----------------------------------------------------------------------------- brute forces
def _sims(method_dir, part):
    """(ids of the part's store, query-store ids, similarities (queries, ids)) as the stores give them."""
    q = open_store(method_dir / "queries")
    ids, blocks = [], []
    for i, s in iter_similarities(q, open_store(method_dir / part)):
        ids += list(i)
        blocks.append(s)
    return ids, q.ids(), np.concatenate(blocks, axis=1)


def _landmark_rows(world, q_ids):
    gnd = __import__("pickle").loads((world / "lm" / "gnd_city.pkl").read_bytes())
    qim = gnd["qimlist"]
    out = {}
    for r, q in enumerate(q_ids):
        out.setdefault(gnd["gnd"][qim.index(q)]["landmark"], []).append(r)
    return out


def _top_k(world, method_dir, k):
    """Per landmark: the k candidates of highest max-over-its-queries similarity (desc), ties by
    photo id asc; and the k-th / (k+1)-th similarities (to see whether a tie is cut)."""
    ids, q_ids, sims = _sims(method_dir, "candidates")
    pid = np.array(ids, np.int64)
    out, cut_ties = {}, 0
    for lm, rows in _landmark_rows(world, q_ids).items():
        best = sims[rows].max(axis=0)
        order = sorted(range(pid.size), key=lambda j: (-float(best[j]), int(pid[j])))
        out[lm] = set(pid[order[:k]].tolist())
        if k < pid.size and best[order[k - 1]] == best[order[k]]:
            cut_ties += 1
    return out, cut_ties


def _brute_shortlist(world, method_dirs, k):
    chosen, cut = set(), 0
    for d in method_dirs:
        tops, c = _top_k(world, d, k)
        cut += c
        for s in tops.values():
            chosen |= s
    return chosen, cut


def _brute_scores(world, method_dir):
    """Each candidate's score: Σ_q (#described positives below + ½ #equal) / #described positives;
    and the number of (query, candidate, positive) exact ties."""
    gnd = __import__("pickle").loads((world / "lm" / "gnd_city.pkl").read_bytes())
    db_ids, q_ids, db_sims = _sims(method_dir, "database")
    c_ids, q_ids2, c_sims = _sims(method_dir, "candidates")
    assert q_ids == q_ids2
    score = np.zeros(len(c_ids))
    ties = 0
    for r, q in enumerate(q_ids):
        g = gnd["gnd"][gnd["qimlist"].index(q)]
        pos_names = {gnd["imlist"][i] for i in g["easy"] + g["hard"]}
        cols = [c for c, name in enumerate(db_ids) if name in pos_names]
        if not cols:
            continue
        pos = db_sims[r, cols]
        for j in range(len(c_ids)):
            below = int(np.sum(pos < c_sims[r, j]))
            equal = int(np.sum(pos == c_sims[r, j]))
            ties += equal
            score[j] += (below + 0.5 * equal) / len(cols)
    return np.array(c_ids, np.int64), score, ties


# ----------------------------------------------------------------------------- the shortlist
def _tie_k(world):
    """A K that cuts the group of candidates with identical descriptors (ids 1000..1063) for lm0 by
    gem: those above them, plus 4 of the 10."""
    ids, q_ids, sims = _sims(world / "desc" / "gem", "candidates")
    best = sims[_landmark_rows(world, q_ids)["lm0"]].max(axis=0)
    return int(np.sum(best > best[0])) + 4


def test_shortlist_equals_brute_force_for_two_k(world, tmp_path):
    dirs = [world / "desc" / "gem", world / "desc" / "sift"]
    cut_total = 0
    for k in (5, _tie_k(world)):
        st = run_shortlist(landmarks=_gnd(world), descriptors=dirs, out=tmp_path / f"k{k}",
                           options=_options(shortlist=k), progress=False)
        ids, is_check = load_shortlist(tmp_path / f"k{k}" / "shortlist.parquet")
        want, cut = _brute_shortlist(world, dirs, k)
        cut_total += cut
        assert set(ids[~is_check].tolist()) == want and len(want) > k
        assert (np.diff(ids) > 0).all()
        assert st["shortlisted"] == len(want) and st["candidates"] == NCAND and st["described"] == ids.size
        assert st["by"] == {"gem": {"candidates": NCAND, "shortlisted": len(_brute_shortlist(world, dirs[:1], k)[0])},
                            "sift": {"candidates": NCAND, "shortlisted": len(_brute_shortlist(world, dirs[1:], k)[0])}}
        assert json.loads((tmp_path / f"k{k}" / "shortlist.json").read_text()) == st
    assert cut_total >= 1  # some K-th and (K+1)-th are an exact tie: the photo-id rule decided


def test_shortlist_ties_are_broken_by_photo_id_not_store_order(world, tmp_path):
    """The same stores with the candidates written in descending photo id give the same shortlist."""
    src = world / "desc" / "gem"
    rev = tmp_path / "desc" / "gem"
    for part in ("queries", "database"):
        shutil.copytree(src / part, rev / part)
    ids, vecs = open_store(src / "candidates").load_all()
    write_store_info(rev / "candidates", {"method": "gem", "kind": "global", "set": "candidates", "dim": DIM})
    order = np.arange(len(ids))[::-1]
    for s in range(0, len(ids), 50):
        write_global_shard(rev / "candidates", f"{s // 50:05d}", [ids[i] for i in order[s:s + 50]], vecs[order[s:s + 50]])
    k = _tie_k(world)
    a = run_shortlist(landmarks=_gnd(world), descriptors=[src], out=tmp_path / "a", options=_options(shortlist=k),
                      progress=False)
    b = run_shortlist(landmarks=_gnd(world), descriptors=[rev], out=tmp_path / "b", options=_options(shortlist=k),
                      progress=False)
    assert a == b
    assert (pq.read_table(tmp_path / "a" / "shortlist.parquet").equals(pq.read_table(tmp_path / "b" / "shortlist.parquet")))
    assert _brute_shortlist(world, [src], k)[1] >= 1  # the tie is cut at K


def test_check_sample_is_off_the_shortlist_seeded_and_sized(world, tmp_path):
    dirs = [world / "desc" / "gem"]
    runs = {}
    for name, check, seed in (("a", 40, 0), ("b", 40, 0), ("c", 40, 1), ("all", 10_000, 0)):
        st = run_shortlist(landmarks=_gnd(world), descriptors=dirs, out=tmp_path / name,
                           options=_options(shortlist=5, check=check, seed=seed), progress=False)
        ids, is_check = load_shortlist(tmp_path / name / "shortlist.parquet")
        runs[name] = (set(ids[~is_check].tolist()), set(ids[is_check].tolist()), st)
    short = runs["a"][0]
    rest = set(range(1000, 1000 + 7 * NCAND, 7)) - short
    for name in ("a", "b", "c"):
        assert runs[name][0] == short and not runs[name][1] & short
        assert len(runs[name][1]) == 40 == runs[name][2]["check"] and runs[name][1] <= rest
    assert runs["a"][1] == runs["b"][1] and runs["a"][1] != runs["c"][1]
    assert runs["all"][1] == rest and runs["all"][2]["described"] == NCAND  # fewer left than asked: all of them


def test_k_larger_than_the_pool_lists_every_candidate_and_checks_none(world, tmp_path):
    st = run_shortlist(landmarks=_gnd(world), descriptors=[world / "desc" / "gem", world / "desc" / "sift"],
                       out=tmp_path, options=_options(shortlist=NCAND + 1, check=40), progress=False)
    ids, is_check = load_shortlist(tmp_path / "shortlist.parquet")
    assert ids.tolist() == list(range(1000, 1000 + 7 * NCAND, 7)) and not is_check.any()
    assert st["check"] == 0 and st["shortlisted"] == NCAND and st["share"] == 1.0


def test_shortlist_without_stores_is_refused(world, tmp_path):
    with pytest.raises(UserError, match="--descriptors"):
        run_shortlist(landmarks=_gnd(world), descriptors=[], out=tmp_path, options=_options(), progress=False)


# ----------------------------------------------------------------------------- the scores
@pytest.mark.parametrize("method", ["gem", "sift"])
def test_below_positive_scores_equal_brute_force_with_half_ties(world, method):
    b = as_list(_gnd(world))
    ids, score = below_positive_scores(world / "desc" / method, b, load_all(b))
    want_ids, want, ties = _brute_scores(world, world / "desc" / method)
    assert ids.tolist() == want_ids.tolist()
    np.testing.assert_allclose(score, want, rtol=0, atol=1e-12)
    assert ties >= 1  # an exact tie with a positive happened, counted one half
    q_ids = open_store(world / "desc" / method / "queries").ids()
    assert "lm2_005" in q_ids  # the query without positives is in the store, and adds nothing (brute force skips it)
    assert score.max() <= 5 + 1e-9


@pytest.mark.parametrize("method", ["gem", "sift"])
def test_the_check_scores_are_the_score_stages_column_bit_for_bit(world, method, tmp_path):
    """The cascade's check and `mining score` count with one piece of code (mining.retrieval.counting):
    a method's score is the same float64 whichever computed it. Set aside: the candidates that are
    exact copies of a database image, whose similarity (not count) may differ in its last bit
    between score's fused GEMM and the stores' (an exact tie with a positive seen as a tie by one
    and not the other; the closing note of issue 46 has it)."""
    from mining.settings.options import defaults
    from mining.stages.score import Inputs, run as run_score

    b = as_list(_gnd(world))
    ids, score = below_positive_scores(world / "desc" / method, b, load_all(b))
    run_score(inputs=Inputs(landmarks=[_gnd(world)], descriptors=[world / "desc" / method]), out=tmp_path,
              options=defaults("score"), progress=False)
    table = pq.read_table(tmp_path / "scores.parquet", columns=["photo_id", f"score_{method}"]).to_pydict()
    by_id = dict(zip(table["photo_id"], table[f"score_{method}"]))
    _, db = open_store(world / "desc" / method / "database").load_all()
    c_ids, cands = open_store(world / "desc" / method / "candidates").load_all()
    copies = {int(i) for i, v in zip(c_ids, cands) if (db == v).all(axis=1).any()}
    assert len(copies) == 10 and len(by_id) == ids.size and score.any()  # the world's ten planted copies
    kept = [k for k, i in enumerate(ids) if int(i) not in copies]
    assert [by_id[int(ids[k])] for k in kept] == score[kept].tolist()


def test_a_query_without_positives_adds_nothing(world, tmp_path):
    """Dropping query 5 (no positives) from the query store leaves every score unchanged."""
    src = world / "desc" / "sift"
    d = tmp_path / "sift"
    shutil.copytree(src / "database", d / "database")
    shutil.copytree(src / "candidates", d / "candidates")
    ids, vecs = open_store(src / "queries").load_all()
    keep = [i for i, q in enumerate(ids) if q != "lm2_005"]
    assert len(keep) == len(ids) - 1
    write_store_info(d / "queries", {"method": "sift", "kind": "global", "set": "queries", "dim": DIM})
    write_global_shard(d / "queries", "00000", [ids[i] for i in keep], vecs[keep])
    b = as_list(_gnd(world))
    full = below_positive_scores(src, b, load_all(b))[1]
    assert np.array_equal(below_positive_scores(d, b, load_all(b))[1], full)
    assert full.sum() > 0


# ----------------------------------------------------------------------------- the check
def _cascaded_copy(world, root, shortlist, rows="all", cascade=True):
    """DESC/sift with its candidates store holding only the shortlist's rows (`rows`: "all", or
    "short" for the shortlisted ones only), store.json's `cascade` block as describe writes it."""
    src = world / "desc" / "sift"
    d = root / "sift"
    for part in ("queries", "database"):
        shutil.copytree(src / part, d / part)
    listed, is_check = load_shortlist(shortlist)
    keep_ids = set((listed if rows == "all" else listed[~is_check]).tolist())
    ids, vecs = open_store(src / "candidates").load_all()
    keep = [i for i, p in enumerate(ids) if int(p) in keep_ids]
    info = {"method": "sift", "kind": "global", "set": "candidates", "dim": DIM}
    if cascade:
        info["cascade"] = {"shortlist_sha256": hashlib.sha256(Path(shortlist).read_bytes()).hexdigest()[:16],
                           "listed": int(listed.size), "check": int(is_check.sum()), "described": len(keep),
                           "of": len(ids)}
    write_store_info(d / "candidates", info)
    for s in range(0, len(keep), 50):
        part = keep[s:s + 50]
        write_global_shard(d / "candidates", f"{s // 50:05d}", [ids[i] for i in part], vecs[part])
    return d


@pytest.fixture(scope="module")
def cascaded(world, tmp_path_factory):
    """A shortlist by gem (5 per landmark, 60 checked) and sift described on it."""
    root = tmp_path_factory.mktemp("cascaded")
    run_shortlist(landmarks=_gnd(world), descriptors=[world / "desc" / "gem"], out=root / "cascade",
                  options=_options(shortlist=5, check=60), progress=False)
    sl = root / "cascade" / "shortlist.parquet"
    return sl, _cascaded_copy(world, root / "desc", sl)


def test_check_measures_the_missed_share_from_the_check_sample(world, cascaded, tmp_path):
    sl, d = cascaded
    r = run_check(landmarks=_gnd(world), descriptors=[d], shortlist=sl, out=tmp_path, options=_options(max_missed=1.0))
    assert json.loads((tmp_path / "check.json").read_text()) == r
    m = r["methods"]["sift"]
    # recomputed from the FULL store's brute-force scores
    ids, is_check = load_shortlist(sl)
    cand, score, _ = _brute_scores(world, world / "desc" / "sift")
    by_id = dict(zip(cand.tolist(), score))
    checked = np.array([by_id[i] for i in ids[is_check].tolist()])
    on = sum(by_id[i] for i in ids[~is_check].tolist())
    off = NCAND - int((~is_check).sum())
    est = checked.mean() * off / (checked.mean() * off + on)
    assert m["described"] == checked.size == 60 and m["off_shortlist"] == off
    assert m["score_on_shortlist"] == pytest.approx(on, abs=1e-6)
    assert m["missed"] == pytest.approx(est, abs=1e-6) and 0 < est < 1
    assert m["escaped"] == int(np.sum(checked > 0)) and m["escaped_rate"] == pytest.approx(m["escaped"] / 60, abs=1e-6)
    hi = checked.max() * off / (checked.max() * off + on)
    assert est - 1e-6 <= m["missed_upper"] <= hi + 1e-6  # a bound on the mean: at least the estimate, at most all-max
    assert m["escaped_upper"] >= m["escaped_rate"] and m["passes"] is True
    assert r["check"] == 60 and r["max_missed"] == 1.0


def test_check_refuses_a_shortlist_that_misses_too_much(world, cascaded, tmp_path):
    sl, d = cascaded
    ids, is_check = load_shortlist(sl)
    cand, score, _ = _brute_scores(world, world / "desc" / "sift")
    assert score[np.isin(cand, ids[is_check])].max() > 0  # the check sample does hold some score
    with pytest.raises(UserError, match=r"cascade check: sift: .*max_missed 0\.0%"):
        run_check(landmarks=_gnd(world), descriptors=[d], shortlist=sl, out=tmp_path, options=_options(max_missed=0.0))
    written = json.loads((tmp_path / "check.json").read_text())
    assert written["methods"]["sift"]["passes"] is False


def test_check_refuses_a_store_not_described_on_a_shortlist(world, cascaded, tmp_path):
    sl, _ = cascaded
    with pytest.raises(UserError, match="not described on a shortlist"):
        run_check(landmarks=_gnd(world), descriptors=[world / "desc" / "sift"], shortlist=sl, out=tmp_path,
                  options=_options())
    no_block = _cascaded_copy(world, tmp_path / "noblock", sl, cascade=False)
    with pytest.raises(UserError, match="not described on a shortlist"):
        run_check(landmarks=_gnd(world), descriptors=[no_block], shortlist=sl, out=tmp_path, options=_options())


def test_check_refuses_a_store_without_its_check_sample(world, cascaded, tmp_path):
    sl, _ = cascaded
    d = _cascaded_copy(world, tmp_path, sl, rows="short")
    with pytest.raises(UserError, match="only 0 of the 60 check candidates"):
        run_check(landmarks=_gnd(world), descriptors=[d], shortlist=sl, out=tmp_path / "out", options=_options())


def test_evaluate_finds_the_cascaded_methods(world, cascaded):
    _, d = cascaded
    info = open_store(d / "candidates").info["cascade"]
    assert cascaded_methods([world / "desc" / "gem", d]) == {
        "sift": {"described": info["described"], "of": NCAND, "check": 60}}
    assert cascaded_methods([world / "desc" / "gem"]) == {}


# ----------------------------------------------------------------------------- describe --shortlist
def _write_shortlist(path, ids, check):
    pq.write_table(pa.table({"photo_id": pa.array(ids, pa.int64()), "check": pa.array(check)}), path)
    return path


def test_on_shortlist_keeps_the_listed_candidates_in_store_order(tmp_path):
    items = [ImageItem(str(i), f"/img/{i}.jpg") for i in (5, 9, 12, 30, 31, 47, 50, 88)]
    sl = _write_shortlist(tmp_path / "s.parquet", [9, 30, 47, 50, 77], [False, True, False, True, False])
    kept, rec = on_shortlist(items, "candidates", sl)
    assert kept == [items[1], items[3], items[5], items[6]]  # 77 is not among the images
    assert rec == {"shortlist_sha256": hashlib.sha256(sl.read_bytes()).hexdigest()[:16], "listed": 5, "check": 2,
                   "described": 4, "of": 8}


@pytest.mark.parametrize("image_set", ["queries", "database"])
def test_on_shortlist_refuses_a_landmark_set(tmp_path, image_set):
    sl = _write_shortlist(tmp_path / "s.parquet", [1], [False])
    with pytest.raises(UserError, match="--set candidates"):
        on_shortlist([ImageItem("1", "/img/1.jpg")], image_set, sl)


def test_on_shortlist_refuses_another_runs_shortlist(tmp_path):
    items = [ImageItem(str(i), f"/img/{i}.jpg") for i in range(10)]
    half = _write_shortlist(tmp_path / "half.parquet", [3, 100], [False, False])
    assert [it.id for it in on_shortlist(items, "candidates", half)[0]] == ["3"]  # one of two: still this run's
    other = _write_shortlist(tmp_path / "other.parquet", [3, 100, 101], [False, False, True])
    with pytest.raises(UserError, match="only 1 of its 3 photos"):
        on_shortlist(items, "candidates", other)


# ----------------------------------------------------------------------------- the manifest
def _demo():
    return yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())


@pytest.mark.parametrize("methods, cascade, key, words", [
    (None, {"methods": ["cnn-gem-lite0"]}, "cascade.methods[0]", "described by no one"),
    (None, {"methods": ["cnn-gem-lite2"], "by": ["cnn-gem-lite2"]}, "cascade.by[0]", "not cascaded"),
    (None, {"methods": ["rsift-asmk", "rsift-vlad"], "by": ["cnn-gem-lite2"]}, "cascade.by[0]", "mining methods"),
    (["rsift-asmk", "rsift-vlad"], {"methods": ["rsift-asmk"]}, "cascade.methods", "share one feature extraction"),
    (None, {"methods": ["cnn-gem", "rsift-asmk", "rsift-vlad"]}, "cascade.by", "no mining method is left"),
    (["rsift-asmk", "rsift-vlad"], {"methods": ["rsift-asmk", "rsift-vlad"]}, "cascade.by", "no mining method is left"),
], ids=["not-described", "by-cascaded", "by-held-out", "half-a-shared-extraction", "every-mining-method", "every-mining-method-held-out-none"])
def test_manifest_refuses_a_bad_cascade(methods, cascade, key, words):
    m = _demo()
    if methods is not None:  # without cnn-gem nor the held-out network: checked without building a network
        m["methods"] = methods
        m["evaluate"]["held_out"] = []
        m["describe"]["params"] = {k: v for k, v in m["describe"]["params"].items() if k in methods}
    m["cascade"] = cascade
    with pytest.raises(UserError) as exc:
        manifest.validate(m, "x.yaml")
    assert key in str(exc.value) and words in str(exc.value), str(exc.value)


def test_validating_a_manifest_without_a_cascade_builds_no_method(tmp_path):
    """The cascade's check of shared extractions builds each method (cnn-gem: an ONNX export, torch)
    only when something is cascaded: a plain manifest validates as fast as before."""
    code = ("import sys; from mining.settings import manifest; m = manifest.load(sys.argv[1]); "
            "print(m.cascaded, 'torch' in sys.modules)")
    env = dict(os.environ, MINING_CACHE_DIR=str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    r = subprocess.run([sys.executable, "-c", code, str(REPO / "manifests" / "demo.yaml")], capture_output=True,
                       text=True, env=env, timeout=600, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["[]", "False"] and not any((tmp_path / "cache").iterdir())


def test_manifest_accepts_a_cascade_and_names_who_shortlists(tmp_path):
    path = tmp_path / "m.yaml"
    m = _demo()
    path.write_text(yaml.safe_dump(m))
    plain = manifest.load(path)
    assert plain.cascaded == [] and plain.shortlisted_by == []
    m["cascade"] = {"methods": ["cnn-gem-lite2"]}
    path.write_text(yaml.safe_dump(m))
    got = manifest.load(path)
    assert got.cascaded == ["cnn-gem-lite2"] and got.shortlisted_by == ["cnn-gem", "rsift-asmk", "rsift-vlad"]
    assert got["cascade"]["shortlist"] >= 1 and 0 <= got["cascade"]["max_missed"] <= 1  # the schema's defaults filled
    m["cascade"] = {"methods": ["rsift-asmk", "rsift-vlad"], "by": ["cnn-gem"]}  # a shared group, cascaded whole
    path.write_text(yaml.safe_dump(m))
    got = manifest.load(path)
    assert got.cascaded == ["rsift-asmk", "rsift-vlad"] and got.shortlisted_by == ["cnn-gem"]


# ----------------------------------------------------------------------------- the evaluation's rows
def test_row_label_marks_cascaded_methods():
    rep = {"held_out": ["cnn-gem-lite2"], "cascade": {"cnn-gem-lite2": {"described": 5, "of": 9, "check": 1},
                                                      "x": {"described": 5, "of": 9, "check": 1}}}
    assert row_label(rep, "cnn-gem-lite2") == "cnn-gem-lite2 (held out, cascade)"
    assert row_label(rep, "x+αQE") == "x+αQE (cascade)" and row_label(rep, "x") == "x (cascade)"
    assert row_label(rep, "y+αQE") == "y+αQE" and row_label({}, "x") == "x"


# ----------------------------------------------------------------------------- the workflow
def _dry_run(tmp_path, cascade):
    m = _demo()
    m["results"] = str(tmp_path / "results")
    if cascade:
        m["cascade"] = cascade
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(m))
    r = snakemake(tmp_path, "-n", "-p", "--cores", "2", manifest=path, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def _jobs(out, rule):
    return [b.split("\n\n", 1)[0] for b in out.split(f"\nrule {rule}:\n")[1:]]


def _shells(out):
    return [shlex.split(line.removeprefix("Shell command: ").split(" > ")[0]) for line in out.splitlines()
            if line.startswith("Shell command: mining")]


def _values(words, flag):
    rest = words[words.index(flag) + 1:]
    return rest[:next((i for i, w in enumerate(rest) if w.startswith("--")), len(rest))]


def test_dry_run_plans_the_cascade(tmp_path):
    out = _dry_run(tmp_path, {"methods": ["cnn-gem-lite2"], "shortlist": 20, "check": 40})
    assert len(_jobs(out, "cascade_shortlist")) == 1 and len(_jobs(out, "cascade_check")) == 1
    check_json = str(tmp_path / "results" / "cascade" / "check.json")
    for rule in ("score", "evaluate"):
        (job,) = _jobs(out, rule)
        inputs = job.split("input: ", 1)[1].split("\n", 1)[0].split(", ")
        assert check_json in inputs, job
    describe = [w for w in _shells(out) if w[:2] == ["mining", "describe"] and "candidates" == w[w.index("--set") + 1]]
    methods = {w[w.index("--method") + 1]: w for w in describe}
    assert set(methods) == {"cnn-gem", "rsift-asmk,rsift-vlad", "cnn-gem-lite2"}
    for name, words in methods.items():
        if name == "cnn-gem-lite2":
            assert words[words.index("--shortlist") + 1] == str(tmp_path / "results" / "cascade" / "shortlist.parquet")
        else:
            assert "--shortlist" not in words, words
    by_desc = {w[2]: _values(w, "--descriptors") for w in _shells(out) if w[:2] == ["mining", "cascade"]}
    desc = tmp_path / "results" / "descriptors"
    assert by_desc == {"shortlist": [str(desc / m) for m in ("cnn-gem", "rsift-asmk", "rsift-vlad")],
                       "check": [str(desc / "cnn-gem-lite2")]}


def test_dry_run_without_a_cascade_plans_no_cascade_job(tmp_path):
    out = _dry_run(tmp_path, None)
    assert "rule score:" in out and "rule evaluate:" in out
    assert "cascade_shortlist" not in out and "cascade_check" not in out and "--shortlist" not in out
    assert "cascade/check.json" not in out


# ----------------------------------------------------------------------------- the CLI
@pytest.mark.parametrize("args", [["cascade"], ["cascade", "shortlist"], ["cascade", "check"]])
def test_cli_help(args):
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    r = subprocess.run([str(bin_dir / "mining"), *args, "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "usage: mining " + " ".join(args) in r.stdout
