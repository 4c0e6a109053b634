"""`mining score`: the below-positive fraction against a slow, obviously correct reference."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow.parquet as pq
import pytest

from mining.cli import main
from mining.retrieval.descriptors import write_global_shard, write_store_info
from mining.errors import UserError
from mining.stages.score import PIECE, CandidateVectors, MethodInput, PositiveCounter, Problem, score_candidates


# ----------------------------------------------------------------------------- reference
def ref_frac(s_d: float, positives: list[float]) -> float:
    less = sum(1 for p in positives if p < s_d)
    eq = sum(1 for p in positives if p == s_d)
    return (2 * less + eq) * (1.0 / (2.0 * len(positives)))


def reference(problem: Problem, methods: list[dict], review_top: int):
    """methods: dicts with name, query_index, positive_sims (lists), sims {photo_id: [per row]}."""
    all_ids = []
    for m in methods:
        for pid in m["order"]:
            if pid not in all_ids:
                all_ids.append(pid)
    out = {}
    for pid in all_ids:
        total, per_method, missing = 0.0, {}, 0
        lm = {name: 0.0 for name in problem.landmarks}
        qc = {}
        for m in methods:
            if pid not in m["sims"]:
                per_method[m["name"]] = None
                missing += 1
                continue
            acc = 0.0
            for row, qi in enumerate(m["query_index"]):
                pos = m["positive_sims"][row]
                if not pos:
                    continue
                f = ref_frac(m["sims"][pid][row], pos)
                acc += f
                qc[qi] = qc.get(qi, 0.0) + f
                lm[problem.query_landmark[qi]] += f
            per_method[m["name"]] = acc
            total += acc
        closest = None
        if total > 0:
            closest = max(problem.landmarks, key=lambda n: (lm[n], -problem.landmarks.index(n)))
        out[pid] = dict(score=total, per_method=per_method, missing=missing, closest=closest, lm=lm, qc=qc)
    queue = {}
    for li, name in enumerate(problem.landmarks):
        qs = [i for i, l in enumerate(problem.query_landmark) if l == name]
        rows = []
        for pid, r in out.items():
            if r["lm"][name] > 0:
                best = max(qs, key=lambda q: (r["qc"].get(q, 0.0), -q))
                rows.append((-r["lm"][name], pid, best))
        rows.sort()
        queue[name] = [(-c, pid, q) for c, pid, q in rows[:review_top]]
    return out, queue


# ----------------------------------------------------------------------------- fixtures
def random_problem(seed: int, n_cand: int = 60, quantum: float = 0.125):
    """Quantised similarities (many ties), a query without positives, methods holding
    different candidate sets in different orders."""
    rng = np.random.default_rng(seed)
    problem = Problem(
        query_names=["tower_001", "tower_002", "bridge_001", "bridge_002", "gate_001"],
        query_landmark=["tower", "tower", "bridge", "bridge", "gate"],
        landmarks=["tower", "bridge", "gate"],
    )
    n_pos = [5, 1, 7, 0, 3]  # bridge_002 has no positives
    all_ids = rng.choice(10**9, size=n_cand, replace=False).astype(np.int64)
    specs = []
    for mi, name in enumerate(["cnn", "sift", "third"]):
        keep = rng.random(n_cand) > (0 if mi == 0 else 0.2)
        ids = all_ids[keep]
        if mi == 1:
            ids = ids[::-1]  # order disagrees with the first method: the spilled path
        rows = rng.permutation(5)[: 5 if mi != 2 else 4]  # third method lacks one query
        def q(size):
            return (np.round(rng.uniform(-1, 1, size) / quantum) * quantum).astype(np.float32)
        pos = [q(n_pos[r]) for r in rows]
        sims = q((len(rows), len(ids)))
        specs.append(dict(name=name, query_index=rows, positive_sims=pos, ids=ids, sims=sims))
    return problem, specs


def to_inputs(specs, block: int):
    out = []
    for s in specs:
        def blocks(s=s):
            for a in range(0, s["sims"].shape[1], block):
                yield s["sims"][:, a:a + block]
        out.append(MethodInput(s["name"], s["query_index"], s["positive_sims"], s["ids"], blocks))
    return out


def to_reference(specs):
    return [dict(name=s["name"], query_index=list(s["query_index"]),
                 positive_sims=[p.tolist() for p in s["positive_sims"]],
                 order=s["ids"].tolist(),
                 sims={int(pid): s["sims"][:, j].tolist() for j, pid in enumerate(s["ids"])})
            for s in specs]


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("quantum", [0.25, 0.0625])
def test_positive_counter_matches_brute_force(quantum):
    rng = np.random.default_rng(1)
    for size in (1, 2, 5, 40):
        pos = (np.round(rng.uniform(-1, 1, size) / quantum) * quantum).astype(np.float32)
        counter = PositiveCounter.build(pos)
        s = np.concatenate([(np.round(rng.uniform(-1.5, 1.5, 500) / quantum) * quantum),
                            pos, np.nextafter(pos, 2), np.nextafter(pos, -2), [-1e30, 1e30]]).astype(np.float32)
        got = counter.count_doubled(s)
        want = [2 * int((pos < v).sum()) + int((pos == v).sum()) for v in s]
        assert got.tolist() == want
    same = PositiveCounter.build(np.full(4, 0.5, np.float32))
    assert same.count_doubled(np.array([0.4, 0.5, 0.6], np.float32)).tolist() == [0, 4, 8]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_score_matches_reference_and_streaming_equals_in_memory(seed):
    problem, specs = random_problem(seed)
    ref, queue = reference(problem, to_reference(specs), review_top=4)
    results = [score_candidates(problem, to_inputs(specs, block), chunk=chunk, review_top=4)
               for block, chunk in [(10**6, 10**6), (7, 5), (1, 13), (16, 1)]]
    first = results[0]
    assert first.photo_id.tolist() == list(ref)
    assert first.score.tolist() == [r["score"] for r in ref.values()]
    for name in ("cnn", "sift", "third"):
        want = [np.nan if r["per_method"][name] is None else r["per_method"][name] for r in ref.values()]
        np.testing.assert_array_equal(first.method_scores[name], want)
    assert first.methods_missing.tolist() == [r["missing"] for r in ref.values()]
    assert first.methods_missing.max() >= 1 and first.stats["candidates_missing_some_method"] > 0
    closest = [None if c < 0 else problem.landmarks[c] for c in first.closest_landmark]
    assert closest == [r["closest"] for r in ref.values()]
    for lm in problem.landmarks:
        t = first.review[lm]
        assert list(zip(t.contrib.tolist(), t.photo_id.tolist(), t.best_query.tolist())) == queue[lm]
    assert first.review["tower"].photo_id.size == 4
    assert first.stats["methods"]["sift"]["aligned"] == "spilled"
    for other in results[1:]:  # streaming in any chunking == in memory, bit for bit
        np.testing.assert_array_equal(other.photo_id, first.photo_id)
        np.testing.assert_array_equal(other.score, first.score)
        np.testing.assert_array_equal(other.closest_landmark, first.closest_landmark)
        for name in first.method_scores:
            np.testing.assert_array_equal(other.method_scores[name], first.method_scores[name])
        for lm in problem.landmarks:
            np.testing.assert_array_equal(other.review[lm].photo_id, first.review[lm].photo_id)
            np.testing.assert_array_equal(other.review[lm].contrib, first.review[lm].contrib)
            np.testing.assert_array_equal(other.review[lm].best_query, first.review[lm].best_query)


def test_query_without_positives_contributes_nothing():
    problem = Problem(["a_001", "b_001"], ["a", "b"], ["a", "b"])
    ids = np.array([5, 3], np.int64)
    sims = np.array([[0.9, 0.1], [1.0, 1.0]], np.float32)
    m = MethodInput("m", np.array([0, 1]), [np.array([0.5], np.float32), np.zeros(0, np.float32)], ids,
                    lambda: iter([sims]))
    r = score_candidates(problem, [m], chunk=1, review_top=10)
    assert r.score.tolist() == [1.0, 0.0]
    assert r.closest_landmark.tolist() == [0, -1]
    assert r.review["a"].photo_id.tolist() == [5] and r.review["b"].photo_id.size == 0


# ----------------------------------------------------------------------------- global descriptors
def vector_methods(seed: int, n_cand: int, dim: int, dyadic: bool, shard: int = 1234, dtype=np.float16):
    """Two global methods yielding float16 CandidateVectors in shards of `shard` rows; the
    second holds its candidates in reverse order (the spilled path)."""
    rng = np.random.default_rng(seed)
    n_q = 16  # BLAS picks shape-dependent kernels from here on (with 7 it did not)
    problem = Problem([f"q{i}" for i in range(n_q)], ["a"] * 6 + ["b"] * 5 + ["c"] * 5, ["a", "b", "c"])

    def vectors(n):
        if dyadic:  # dot products exact in float32 whatever the summation order
            return (rng.integers(-2, 3, size=(n, dim)) / 4).astype(np.float16)
        v = rng.standard_normal((n, dim)).astype(np.float32)
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float16)

    ids = rng.choice(10**9, size=n_cand, replace=False).astype(np.int64)
    methods, truth = [], []
    for mi, name in enumerate(["g1", "g2"]):
        q = vectors(n_q).astype(np.float32)
        db = vectors(40).astype(np.float32)
        cand = vectors(n_cand)
        twins = cand[rng.choice(n_cand, size=200, replace=False)].astype(np.float32)  # duplicates of positives:
        pos = [np.concatenate([q[i] @ db[rng.choice(40, size=int(rng.integers(0 if i == n_q - 1 else 1, 12)),  # ties,
                                                  replace=False)].T,                   # or one ulp off if
                               (q[i] @ twins.T) if i != n_q - 1 else []])                   # BLAS rounds them
               for i in range(n_q)]                                                    # differently
        order = np.arange(n_cand) if mi == 0 else np.arange(n_cand)[::-1]

        def blocks(cand=cand, order=order):
            for a in range(0, n_cand, shard):
                yield CandidateVectors(cand[order[a:a + shard]].astype(dtype))

        methods.append(MethodInput(name, np.arange(n_q), [np.asarray(p, np.float32) for p in pos], ids[order], blocks,
                                   query_vectors=q))
        truth.append((q, pos, cand))
    return problem, methods, truth, ids


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_global_vectors_match_brute_force(dtype):
    problem, methods, truth, ids = vector_methods(0, n_cand=3 * PIECE + 77, dim=16, dyadic=True, dtype=dtype)
    r = score_candidates(problem, methods, chunk=1000, review_top=5, threads=2)
    assert r.photo_id.tolist() == ids.tolist()
    assert r.stats["methods"]["g2"]["aligned"] == "spilled"
    for (name, (q, pos, cand)) in zip(["g1", "g2"], truth):
        sims = cand.astype(np.float64) @ q.astype(np.float64).T  # exact: dyadic values
        want = np.zeros(len(ids))
        for i, p in enumerate(pos):
            if len(p):
                p = np.asarray(p, np.float64)
                want += ((p[None, :] < sims[:, i:i + 1]).sum(1) * 2 + (p[None, :] == sims[:, i:i + 1]).sum(1)) / (2 * len(p))
        np.testing.assert_allclose(r.method_scores[name], want, rtol=0, atol=1e-12)
    assert (r.score > 0).any() and len({round(x, 9) for x in r.score}) > 50  # ties, but not all equal


def test_global_vectors_are_independent_of_chunk_size_and_threads():
    """BLAS rounds differently for different product shapes and thread counts; the score
    multiplies fixed pieces on one thread each, so nothing changes a bit."""
    problem, methods, _, _ = vector_methods(1, n_cand=3 * PIECE + 501, dim=512, dyadic=False, shard=999)
    runs = [score_candidates(problem, methods, chunk=chunk, review_top=20, threads=threads)
            for chunk, threads in [(10**6, 1), (10**6, 4), (777, 2), (PIECE, 3), (2 * PIECE + 1, 1)]]
    first = runs[0]
    for other in runs[1:]:
        np.testing.assert_array_equal(other.score, first.score)
        for name in first.method_scores:
            np.testing.assert_array_equal(other.method_scores[name], first.method_scores[name])
        np.testing.assert_array_equal(other.closest_landmark, first.closest_landmark)
        for lm in problem.landmarks:
            np.testing.assert_array_equal(other.review[lm].photo_id, first.review[lm].photo_id)
            np.testing.assert_array_equal(other.review[lm].best_query, first.review[lm].best_query)
    assert first.review["a"].photo_id.size == 20 and set(first.review["a"].best_query) <= set(range(6))


def test_duplicate_candidate_ids_are_refused():
    problem, specs = random_problem(0)
    for victim in (0, 1):
        bad = [dict(s) for s in specs]
        bad[victim]["ids"] = bad[victim]["ids"].copy()
        bad[victim]["ids"][1] = bad[victim]["ids"][0]
        with pytest.raises(UserError, match=f"method {bad[victim]['name']}: candidate store holds duplicate ids"):
            score_candidates(problem, to_inputs(bad, 10), chunk=10, review_top=3)


# ----------------------------------------------------------------------------- CLI on stores
def make_world(root, rng, n_cand=40, dim=8):
    """Landmarks + three method stores whose dot products are exact (dyadic vectors)."""
    imlist = [f"db{i}" for i in range(12)]
    qimlist = ["tower_001", "tower_002", "bridge_001"]
    gnd = [{"bbx": [0, 0, 1, 1], "easy": [0, 1, 2], "hard": [3], "junk": [4]},
           {"bbx": [0, 0, 1, 1], "easy": [], "hard": [], "junk": []},
           {"bbx": [0, 0, 1, 1], "easy": [5, 6], "hard": [7, 8, 9], "junk": []}]
    (root / "gnd").mkdir()
    (root / "gnd" / "gnd_city.pkl").write_bytes(pickle.dumps({"imlist": imlist, "qimlist": qimlist, "gnd": gnd}))
    vec = lambda n: (rng.integers(-2, 3, size=(n, dim)) / 4).astype(np.float32)  # noqa: E731
    cand_ids = [str(i) for i in rng.choice(10**8, n_cand, replace=False)]
    vectors = {}
    for name in ("cnn", "gem"):
        d = root / "desc" / name
        parts = {"queries": (qimlist, vec(3)), "database": (imlist, vec(12)),
                 "candidates": (cand_ids if name == "cnn" else cand_ids[:-3], vec(n_cand if name == "cnn" else n_cand - 3))}
        for part, (ids, v) in parts.items():
            write_store_info(d / part, {"method": name, "kind": "global", "set": part, "dim": dim})
            half = len(ids) // 2
            write_global_shard(d / part, "00000", ids[:half], v[:half])
            write_global_shard(d / part, "00001", ids[half:], v[half:])
        vectors[name] = parts
    return root / "gnd", [root / "desc" / "cnn", root / "desc" / "gem"], vectors, gnd


def test_cli_on_stores_matches_brute_force(tmp_path):
    rng = np.random.default_rng(7)
    gnd_dir, descs, vectors, gnd = make_world(tmp_path, rng)
    out = tmp_path / "scores"
    assert main(["score", "--landmarks", str(gnd_dir), "--descriptors", *map(str, descs), "--out", str(out),
                 "--review-top", "3", "--chunk", "6", "--no-progress"]) == 0
    scores = pq.read_table(out / "scores.parquet").to_pandas()
    assert scores.columns.tolist() == ["photo_id", "score", "score_cnn", "score_gem", "closest_landmark",
                                       "methods_missing"]
    assert scores.photo_id.is_monotonic_increasing
    want = {}
    for name, parts in vectors.items():
        q, db, (cids, cv) = parts["queries"][1], parts["database"][1], parts["candidates"]
        for j, cid in enumerate(cids):
            tot = 0.0
            for qi, g in enumerate(gnd):
                pos = [float(q[qi] @ db[p]) for p in sorted(set(g["easy"]) | set(g["hard"]))]
                if pos:
                    tot += ref_frac(float(q[qi] @ cv[j]), pos)
            want.setdefault(int(cid), {})[name] = tot
    got = scores.set_index("photo_id")
    for pid, per in want.items():
        assert got.loc[pid, "score"] == pytest.approx(sum(per.values()), abs=1e-12)
        assert got.loc[pid, "score_cnn"] == pytest.approx(per["cnn"], abs=1e-12)
        assert got.loc[pid, "methods_missing"] == (0 if "gem" in per else 1)
        assert np.isnan(got.loc[pid, "score_gem"]) == ("gem" not in per)
    queue = pq.read_table(out / "review_queue.parquet").to_pandas()
    assert set(queue.landmark) <= {"tower", "bridge"}
    assert queue.groupby("landmark").size().max() <= 3
    assert (queue.groupby("landmark")["rank"].apply(list).apply(lambda r: r == list(range(1, len(r) + 1)))).all()
    assert set(queue.best_query) <= {"tower_001", "bridge_001"}  # tower_002 has no positives
    import json

    stats = json.loads((out / "stats.json").read_text())
    from mining.datasets.landmarks import load_landmarks

    assert stats["landmarks_fingerprint"] == load_landmarks(gnd_dir).fingerprint()
    # tower_002 has no positives: its name places it with tower_001
    assert stats["landmark_queries"] == {"tower": ["tower_001", "tower_002"], "bridge": ["bridge_001"]}
    assert stats["queries_without_positives"] == 1 and stats["candidates_missing_some_method"] == 3
    assert stats["methods"]["gem"]["missing"] == 3


def test_cli_refuses_bad_inputs(tmp_path, capsys):
    rng = np.random.default_rng(3)
    gnd_dir, descs, _, _ = make_world(tmp_path, rng)
    out = tmp_path / "o"
    assert main(["score", "--landmarks", str(gnd_dir), "--descriptors", str(tmp_path / "nope"), "--out", str(out)]) == 2
    assert "missing queries/" in capsys.readouterr().err
    assert main(["score", "--landmarks", str(gnd_dir), "--descriptors", str(descs[0]), str(descs[0]),
                 "--out", str(out)]) == 2
    assert "given twice" in capsys.readouterr().err
    write_global_shard(descs[0] / "candidates", "00002", ["not-a-number"], np.zeros((1, 8), np.float32))
    assert main(["score", "--landmarks", str(gnd_dir), "--descriptors", str(descs[0]), "--out", str(out)]) == 2
    assert "not a decimal photo id" in capsys.readouterr().err
    assert not out.exists() or not (out / "scores.parquet").exists()


# ----------------------------------------------------------------------------- one chunk
def test_score_chunk_matches_reference_chunk_by_chunk(tmp_path):
    """The chunk body on its own: each chunk's per-method scores, totals, per-landmark sums,
    missing counts and similarity rows equal the slow reference for exactly those candidates
    (three methods: streamed, spilled, streamed with candidates and a query missing)."""
    from mining.stages.score.loop import Workers, open_readers, prepare, score_chunk

    problem, specs = random_problem(4)
    ref, _ = reference(problem, to_reference(specs), review_top=4)
    ids_all, prepared, stats = prepare(problem, to_inputs(specs, 7))
    assert ids_all.tolist() == list(ref)
    assert [st["aligned"] for st in stats.values()] == ["stream", "spilled", "stream"]
    sims_of = [{int(pid): s["sims"][:, j] for j, pid in enumerate(s["ids"])} for s in specs]
    chunk, seen = 9, 0
    with Workers.start(2) as workers:
        open_readers(prepared, workers, tmp_path, chunk)
        for a in range(0, len(ids_all), chunk):
            b = min(len(ids_all), a + chunk)
            c = score_chunk(a, b, prepared, len(problem.landmarks), workers)
            want = [ref[int(pid)] for pid in ids_all[a:b]]
            assert c.total.tolist() == [r["score"] for r in want]
            assert c.missing.tolist() == [r["missing"] for r in want]
            assert c.landmark_sum.tolist() == [[r["lm"][lm] for lm in problem.landmarks] for r in want]
            for part, s, sims in zip(c.parts, specs, sims_of):
                per = [r["per_method"][s["name"]] for r in want]
                cols = [] if part is None else part.cols.tolist()
                assert [j for j in range(b - a) if per[j] is not None] == cols
                if part is None:
                    continue
                assert part.score.tolist() == [per[j] for j in cols]
                for j in cols:
                    np.testing.assert_array_equal(part.sims[part.row_of[j]], sims[int(ids_all[a + j])])
                    seen += 1
    assert seen == sum(len(s["ids"]) for s in specs)


def test_score_chunk_on_descriptor_stores(tmp_path):
    """Global stores written to disk, read by method_from_stores: each chunk of the fused
    multiply-and-count path gives the brute-force fractions (dyadic vectors: exact products)."""
    from mining.datasets.landmarks import load_landmarks
    from mining.stages.score import method_from_stores
    from mining.stages.score.loop import Workers, open_readers, prepare, score_chunk

    gnd_dir, descs, vectors, gnd = make_world(tmp_path, np.random.default_rng(11), n_cand=30)
    dataset = load_landmarks(gnd_dir)
    methods = [method_from_stores(d, dataset)[0] for d in descs]
    assert all(m.query_vectors is not None for m in methods)  # the CandidateVectors path
    problem = Problem(list(dataset.qimlist), [dataset.query_landmark(i) for i in range(3)], dataset.landmarks)
    ids_all, prepared, _ = prepare(problem, methods)
    got = {m.name: {} for m in methods}
    with Workers.start(3) as workers:
        open_readers(prepared, workers, tmp_path, 4)
        for a in range(0, len(ids_all), 4):
            c = score_chunk(a, min(len(ids_all), a + 4), prepared, len(problem.landmarks), workers)
            for m, part in zip(methods, c.parts):
                if part is None:  # gem lacks the last 3 candidates: a whole chunk of them
                    continue
                for j, v in zip(part.cols.tolist(), part.score.tolist()):
                    got[m.name][int(ids_all[a + j])] = v
    for name, parts in vectors.items():
        q, db, (cids, cv) = parts["queries"][1], parts["database"][1], parts["candidates"]
        want = {}
        for j, cid in enumerate(cids):
            pos_sims = [[float(q[qi] @ db[p]) for p in sorted(set(g["easy"]) | set(g["hard"]))] for qi, g in enumerate(gnd)]
            want[int(cid)] = sum(ref_frac(float(q[qi] @ cv[j]), pos) for qi, pos in enumerate(pos_sims) if pos)
        assert got[name] == pytest.approx(want, abs=1e-12)
        assert len(got[name]) == len(cids)
