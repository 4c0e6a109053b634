"""`mining evaluate --protocol oxford|gldv2|holidays|ukbench`, driven through the CLI.

Expected values come from the definitions in docs/protocols.md, re-implemented here with
exact fractions (not from mining.stages.evaluate), on the real Oxford 5k ground truth and on
generated GLDv2 / Holidays / UKBench files in each benchmark's own format.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from fractions import Fraction as F

import numpy as np
import pytest

from mining.cli import main

from paths import OXFORD


# ---- the definitions (docs/protocols.md), independently of the package -----------------
def ap_def(ranked, positives, ignored=()):
    """Trapezoid AP: ignored names deleted, n = all positives, trapezoids between j/r and (j+1)/(r+1)."""
    kept = [x for x in ranked if x not in set(ignored)]
    ap, j = F(0), 0
    for r, x in enumerate(kept):
        if x in positives:
            ap += ((F(1) if r == 0 else F(j, r)) + F(j + 1, r + 1)) / (2 * len(positives))
            j += 1
    return ap


def p_at_def(ranked, positives, ignored, k):
    kept = [x for x in ranked if x not in set(ignored)]
    pos = [i + 1 for i, x in enumerate(kept) if x in positives]
    kq = min(k, max(pos)) if pos else k
    return F(sum(p <= kq for p in pos), kq)


def ap_at_k_def(pred, relevant, k=100):
    hits, s = 0, F(0)
    for i, x in enumerate(pred[:k], 1):
        if x in relevant:
            hits += 1
            s += F(hits, i)
    return s / min(len(relevant), k)


def mean(values):
    values = list(values)
    return sum(values, F(0)) / len(values)


# ---- running the CLI ---------------------------------------------------------------
def cli(capsys, *args):
    rc = main(["evaluate", "--protocol", *[str(a) for a in args]])
    out = capsys.readouterr()
    return rc, out.out, out.err


def cli_json(capsys, tmp_path, *args):
    path = tmp_path / "metrics.json"
    rc, out, err = cli(capsys, *args, "--json", path)
    assert rc == 0, err
    return json.loads(path.read_text()), out


def refused(capsys, *args):
    rc, out, err = cli(capsys, *args)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("mining evaluate: error: "), err
    return lines[0]


def oxford_queries():
    out = {}
    for f in sorted(OXFORD.glob("*_query.txt")):
        q = f.name[: -len("_query.txt")]
        read = lambda kind: set((OXFORD / f"{q}_{kind}.txt").read_text().split())  # noqa: E731
        out[q] = (read("good") | read("ok"), read("junk") - read("good") - read("ok"))
    return out


# ---- Oxford: the original protocol on the real gt_files --------------------------------
def test_oxford_original_real_gt_three_input_forms_agree_with_the_definition(capsys, tmp_path):
    gt = oxford_queries()
    assert len(gt) == 55
    images = sorted(set().union(*(p | j for p, j in gt.values())) | {f"flickr_{i:04d}" for i in range(300)})
    rng = np.random.default_rng(7)
    order = {q: [images[i] for i in rng.permutation(len(images))] for q in gt}
    expected = mean(ap_def(order[q], p, j) for q, (p, j) in gt.items())
    # the junk rule matters here: counted as negatives, the same rankings score differently
    assert mean(ap_def(order[q], p) for q, (p, _) in gt.items()) != expected

    ranked = tmp_path / "ranked"  # compute_ap's input: one <query>.txt per query
    ranked.mkdir()
    for q, names in order.items():
        (ranked / f"{q}.txt").write_text("\n".join(names) + "\n")
    rep, table = cli_json(capsys, tmp_path, "oxford", "--gt", OXFORD, "--ranks", ranked)
    assert rep["variant"] == "original" and rep["queries"] == 55
    assert rep["metrics"]["original"]["mAP"] == pytest.approx(float(expected), abs=1e-12)
    assert f"| original | {100 * float(expected):.2f} |" in table
    q0 = "all_souls_1"
    assert rep["per_query"]["original"][q0] == pytest.approx(float(ap_def(order[q0], *gt[q0])), abs=1e-12)

    # the same rankings as a .npy of indices into --imlist (queries in sorted name order)
    (tmp_path / "imlist.txt").write_text("\n".join(images) + "\n")
    index = {n: i for i, n in enumerate(images)}
    ranks = np.array([[index[n] for n in order[q]] for q in sorted(gt)]).T
    np.save(tmp_path / "ranks.npy", ranks)
    rep2, _ = cli_json(capsys, tmp_path, "oxford", "--gt", OXFORD, "--ranks", tmp_path / "ranks.npy",
                       "--imlist", tmp_path / "imlist.txt")
    assert rep2["metrics"] == rep["metrics"]

    # ... and as descriptors: database = identity, so query j's similarities are Q[j]
    scores = np.zeros((55, len(images)), np.float32)
    scores[np.arange(55)[:, None], ranks.T] = np.arange(len(images), 0, -1, dtype=np.float32)
    np.save(tmp_path / "q.npy", scores)
    np.save(tmp_path / "x.npy", np.eye(len(images), dtype=np.float32))
    rep3, _ = cli_json(capsys, tmp_path, "oxford", "--gt", OXFORD, "--queries", tmp_path / "q.npy",
                       "--database", tmp_path / "x.npy", "--imlist", tmp_path / "imlist.txt")
    assert rep3["metrics"] == rep["metrics"]


def test_oxford_original_junk_takes_no_rank(capsys, tmp_path):
    gt = oxford_queries()
    ranked = tmp_path / "ranked"
    ranked.mkdir()
    for q, (pos, junk) in gt.items():  # all junk first, then the positives: junk deleted → AP 1
        (ranked / f"{q}.txt").write_text("\n".join(sorted(junk) + sorted(pos)) + "\n")
    rep, table = cli_json(capsys, tmp_path, "oxford", "--gt", OXFORD, "--ranks", ranked)
    assert rep["metrics"]["original"]["mAP"] == pytest.approx(1.0)
    assert "| original | 100.00 |" in table
    (ranked / "all_souls_1.txt").unlink()
    assert "omit 1 queries" in refused(capsys, "oxford", "--gt", OXFORD, "--ranks", ranked)


# ---- Oxford: the revisited protocol from a gnd pickle, with distractors -------------------
def revisited_world(tmp_path):
    """A gnd_*.pkl in revisitop's shape from the real Oxford lists: easy = good, hard = ok, junk = junk."""
    gt = {q: (set((OXFORD / f"{q}_good.txt").read_text().split()), set((OXFORD / f"{q}_ok.txt").read_text().split()),
              set((OXFORD / f"{q}_junk.txt").read_text().split())) for q in sorted(oxford_queries())[:12]}
    imlist = sorted(set().union(*(e | h | j for e, h, j in gt.values())) | {f"neg_{i}" for i in range(40)})
    index = {n: i for i, n in enumerate(imlist)}
    gnd = []
    for e, h, j in gt.values():
        e2, h2 = e, h - e
        gnd.append({"bbx": [1.0, 2.0, 30.0, 40.0], "easy": sorted(index[n] for n in e2),
                    "hard": sorted(index[n] for n in h2), "junk": sorted(index[n] for n in j - e2 - h2)})
    data = {"imlist": imlist, "qimlist": list(gt), "gnd": gnd}
    (tmp_path / "gnd_roxtest.pkl").write_bytes(pickle.dumps(data))
    return data


def test_oxford_revisited_setups_and_distractors(capsys, tmp_path):
    data = revisited_world(tmp_path)
    n, nq = len(data["imlist"]), len(data["qimlist"])
    n_all = n + 25  # 25 distractors appended: indices n..n+24, never positive or ignored
    rng = np.random.default_rng(3)
    ranks = np.stack([rng.permutation(n_all) for _ in range(nq)], axis=1)
    np.save(tmp_path / "ranks.npy", ranks)
    rep, table = cli_json(capsys, tmp_path, "oxford", "--gt", tmp_path / "gnd_roxtest.pkl", "--ranks", tmp_path / "ranks.npy")
    assert rep["variant"] == "revisited" and rep["queries"] == nq
    rules = {"easy": (("easy",), ("hard", "junk")), "medium": (("easy", "hard"), ("junk",)),
             "hard": (("hard",), ("easy", "junk"))}
    values = {}
    for setup, (pos_keys, ign_keys) in rules.items():
        aps, p10 = [], []
        for j, g in enumerate(data["gnd"]):
            pos = {i for k in pos_keys for i in g[k]}
            ign = {i for k in ign_keys for i in g[k]}
            if pos:
                aps.append(ap_def(ranks[:, j].tolist(), pos, ign))
                p10.append(p_at_def(ranks[:, j].tolist(), pos, ign, 10))
        got = rep["metrics"][setup]
        assert got["mAP"] == pytest.approx(float(mean(aps)), abs=1e-12)
        assert got["mP@10"] == pytest.approx(float(mean(p10)), abs=1e-12)
        values[setup] = got["mAP"]
        assert f"| {setup} | {100 * got['mAP']:.2f} |" in table
    assert len(set(values.values())) == 3  # three setups, three different rule sets
    # descriptors: rows past imlist are distractors; putting them first lowers every mAP
    clean = np.stack([ranks[np.argsort(ranks[:, j] >= n, kind="stable"), j] for j in range(nq)], axis=1)
    np.save(tmp_path / "clean.npy", clean)
    harder = np.stack([ranks[np.argsort(ranks[:, j] < n, kind="stable"), j] for j in range(nq)], axis=1)
    rep_clean, _ = cli_json(capsys, tmp_path, "oxford", "--gt", tmp_path / "gnd_roxtest.pkl", "--ranks", tmp_path / "clean.npy")
    scores = np.zeros((nq, n_all), np.float32)
    scores[np.arange(nq)[:, None], harder.T] = np.arange(n_all, 0, -1, dtype=np.float32)
    np.save(tmp_path / "q.npy", scores)
    np.save(tmp_path / "x.npy", np.eye(n_all, dtype=np.float32))
    rep_hard, _ = cli_json(capsys, tmp_path, "oxford", "--gt", tmp_path / "gnd_roxtest.pkl",
                           "--queries", tmp_path / "q.npy", "--database", tmp_path / "x.npy")
    for setup in rules:
        assert rep_hard["metrics"][setup]["mAP"] < rep["metrics"][setup]["mAP"] < rep_clean["metrics"][setup]["mAP"]
    only, _ = cli_json(capsys, tmp_path, "oxford", "--gt", tmp_path / "gnd_roxtest.pkl", "--ranks", tmp_path / "ranks.npy",
                       "--setups", "medium", "hard")
    assert only["metrics"] == {s: rep["metrics"][s] for s in ("medium", "hard")}
    assert "unknown setup 'extreme'" in refused(capsys, "oxford", "--gt", tmp_path / "gnd_roxtest.pkl",
                                                "--ranks", tmp_path / "ranks.npy", "--setups", "extreme")
    np.save(tmp_path / "x_short.npy", np.eye(n - 1, n_all, dtype=np.float32))
    assert "image list has" in refused(capsys, "oxford", "--gt", tmp_path / "gnd_roxtest.pkl",
                                  "--queries", tmp_path / "q.npy", "--database", tmp_path / "x_short.npy")


# ---- GLDv2 ---------------------------------------------------------------------------
def test_gldv2_retrieval_csv_and_npy(capsys, tmp_path):
    rng = np.random.default_rng(5)
    index = [f"{i:016x}" for i in rng.choice(1 << 40, 400, replace=False)]
    tests = [f"{i:016x}" for i in rng.choice(1 << 40, 30, replace=False)]
    sol, usage = {}, {}
    for t, q in enumerate(tests):
        m = 0 if t % 10 == 9 else (130 if t == 0 else int(rng.integers(1, 8)))  # query 0: more than 100 relevant
        sol[q] = [index[i] for i in rng.choice(400, m, replace=False)]
        usage[q] = "Ignored" if t % 7 == 6 else ("Public" if t % 2 else "Private")
    with open(tmp_path / "retrieval_solution_v2.1.csv", "w") as f:
        f.write("id,images,Usage\n")
        for q in tests:
            f.write(f"{q},{' '.join(sol[q]) or 'None'},{usage[q]}\n")
    order = {q: [index[i] for i in rng.permutation(400)] for q in tests}
    with open(tmp_path / "submission.csv", "w") as f:
        f.write("id,images\n")
        for q in tests[:-3]:  # the last three queries get no prediction: AP 0 (if scored)
            f.write(f"{q},{' '.join(order[q][:100])}\n")
    scored = [q for q in tests if usage[q] != "Ignored" and sol[q]]
    expected = mean(ap_at_k_def(order[q] if q in tests[:-3] else [], set(sol[q])) for q in scored)
    # the rules matter: Ignored rows and the 130-relevant query (capped at 100) change the value
    all_rows = [q for q in tests if sol[q]]
    assert mean(ap_at_k_def(order[q] if q in tests[:-3] else [], set(sol[q])) for q in all_rows) != expected
    rep, table = cli_json(capsys, tmp_path, "gldv2", "--gt", tmp_path / "retrieval_solution_v2.1.csv",
                          "--ranks", tmp_path / "submission.csv")
    assert rep["variant"] == "retrieval" and rep["queries"] == len(scored)
    assert rep["metrics"]["retrieval"]["mAP@100"] == pytest.approx(float(expected), abs=1e-12)
    assert f"| retrieval | {100 * float(expected):.2f} |" in table

    # full rankings (400 long) as .npy over --imlist/--qimlist: only the top 100 count
    (tmp_path / "index.txt").write_text("\n".join(index) + "\n")
    (tmp_path / "test.txt").write_text("\n".join(tests) + "\n")
    pos = {n: i for i, n in enumerate(index)}
    np.save(tmp_path / "ranks.npy", np.array([[pos[n] for n in order[q]] for q in tests]).T)
    rep2, _ = cli_json(capsys, tmp_path, "gldv2", "--gt", tmp_path / "retrieval_solution_v2.1.csv",
                       "--ranks", tmp_path / "ranks.npy", "--imlist", tmp_path / "index.txt", "--qimlist", tmp_path / "test.txt")
    full = mean(ap_at_k_def(order[q], set(sol[q])) for q in scored)
    assert rep2["metrics"]["retrieval"]["mAP@100"] == pytest.approx(float(full), abs=1e-12)
    assert "--qimlist" in refused(capsys, "gldv2", "--gt", tmp_path / "retrieval_solution_v2.1.csv",
                                  "--ranks", tmp_path / "ranks.npy", "--imlist", tmp_path / "index.txt")


def test_gldv2_recognition_gap(capsys, tmp_path):
    (tmp_path / "recognition_solution.csv").write_text(
        "id,landmarks,Usage\nq1,7,Public\nq2,8 9,Private\nq3,,Public\nq4,5,Ignored\nq5,6,Public\n")
    (tmp_path / "pred.csv").write_text("id,landmarks\nq1,7 0.9\nq3,3 0.95\nq2,9 0.5\nq4,5 0.99\nq5,1 0.2\n")
    # by confidence (q4 Ignored: left out): q3 wrong (out of domain), q1 right, q2 right, q5 wrong; M = 3
    rep, _ = cli_json(capsys, tmp_path, "gldv2", "--gt", tmp_path / "recognition_solution.csv", "--ranks", tmp_path / "pred.csv")
    assert rep["metrics"]["recognition"]["GAP"] == pytest.approx(float((F(1, 2) + F(2, 3)) / 3))
    (tmp_path / "bad.csv").write_text("id,landmarks\nq1,7 high\n")
    assert "not a number" in refused(capsys, "gldv2", "--gt", tmp_path / "recognition_solution.csv", "--ranks", tmp_path / "bad.csv")


# ---- INRIA Holidays --------------------------------------------------------------------
def holidays_folder(tmp_path, sizes):
    jpg = tmp_path / "jpg"
    jpg.mkdir()
    groups = {}
    for g, size in enumerate(sizes):
        names = [f"{100000 + 100 * g + i}.jpg" for i in range(size)]
        groups[names[0]] = names[1:]
        for n in names:
            (jpg / n).write_bytes(b"\xff\xd8\xff")
    return jpg, groups


def test_holidays_query_excluded_from_its_own_ranking(capsys, tmp_path):
    jpg, groups = holidays_folder(tmp_path, [3, 2, 4, 2, 3])
    images = sorted(p.name for p in jpg.iterdir())
    rng = np.random.default_rng(11)
    order = {q: [images[i] for i in rng.permutation(len(images))] for q in groups}  # the query included somewhere
    with open(tmp_path / "results.dat", "w") as f:  # the official format: `query rank image rank image ...`
        for q, names in order.items():
            f.write(q + "".join(f" {r} {n}" for r, n in enumerate(names)) + "\n")
    expected = mean(ap_def(order[q], set(p), {q}) for q, p in groups.items())
    assert mean(ap_def(order[q], set(p)) for q, p in groups.items()) != expected  # the rule matters
    rep, table = cli_json(capsys, tmp_path, "holidays", "--gt", jpg, "--ranks", tmp_path / "results.dat")
    assert rep["queries"] == 5 and rep["images"] == 14
    assert rep["metrics"]["holidays"]["mAP"] == pytest.approx(float(expected), abs=1e-12)
    assert f"| holidays | {100 * float(expected):.2f} |" in table

    # descriptors of all images only: each query's vector is its own database row; it ranks
    # itself first (ignored), then its group → mAP 1
    x = np.zeros((len(images), 5), np.float32)
    for i, n in enumerate(images):
        x[i, (int(n[:-4]) - 100000) // 100] = 1.0
        x[i] += 0.01 * (i + 1) * np.eye(5, dtype=np.float32)[(i + 1) % 5]
    np.save(tmp_path / "x.npy", x)
    rep2, _ = cli_json(capsys, tmp_path, "holidays", "--gt", jpg, "--database", tmp_path / "x.npy")
    assert rep2["metrics"]["holidays"]["mAP"] == pytest.approx(1.0)

    lines = (tmp_path / "results.dat").read_text().splitlines()
    (tmp_path / "short.dat").write_text("\n".join(lines[:-1]) + "\n")
    assert "omit 1 of 5 queries" in refused(capsys, "holidays", "--gt", jpg, "--ranks", tmp_path / "short.dat")
    (tmp_path / "odd.dat").write_text("100000.jpg 0 100001.jpg first 100002.jpg\n")
    assert "odd.dat:1" in refused(capsys, "holidays", "--gt", jpg, "--ranks", tmp_path / "odd.dat")


# ---- UKBench -----------------------------------------------------------------------------
def test_ukbench_four_score_counts_the_query_itself(capsys, tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    images = [f"ukbench{i:05d}.jpg" for i in range(16)]
    for n in images:
        (full / n).write_bytes(b"\xff\xd8\xff")
    rng = np.random.default_rng(2)
    ranks = np.stack([np.concatenate([[i], rng.permutation(np.setdiff1d(np.arange(16), [i]))]) for i in range(16)], axis=1)
    np.save(tmp_path / "ranks.npy", ranks)
    expected = mean(sum(r // 4 == i // 4 for r in ranks[:4, i]) for i in range(16))
    assert mean(sum(r // 4 == i // 4 for r in ranks[1:5, i]) for i in range(16)) != expected  # self counts
    rep, table = cli_json(capsys, tmp_path, "ukbench", "--gt", full, "--ranks", tmp_path / "ranks.npy")
    assert rep["queries"] == 16 and rep["metrics"]["ukbench"]["4-score"] == pytest.approx(float(expected))
    assert f"| ukbench | {float(expected):.3f} |" in table
    # the same as text lines `QUERY NAME NAME NAME NAME`, with a list of names as ground truth
    (tmp_path / "results.txt").write_text("".join(f"{images[i]} " + " ".join(images[r] for r in ranks[:6, i]) + "\n"
                                                  for i in range(16)))
    (tmp_path / "names.txt").write_text("\n".join(images) + "\n")
    rep2, _ = cli_json(capsys, tmp_path, "ukbench", "--gt", tmp_path / "names.txt", "--ranks", tmp_path / "results.txt")
    assert rep2["metrics"] == rep["metrics"]
    # descriptors: objects are clusters → each image finds its object's 4 images: 4.0
    x = np.repeat(np.eye(4, dtype=np.float32), 4, axis=0) + 0.01 * rng.standard_normal((16, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    rep3, _ = cli_json(capsys, tmp_path, "ukbench", "--gt", full, "--database", tmp_path / "x.npy")
    assert rep3["metrics"]["ukbench"]["4-score"] == 4.0
    (full / "ukbench00016.jpg").write_bytes(b"")
    assert "object 4 has 1 images" in refused(capsys, "ukbench", "--gt", full, "--ranks", tmp_path / "ranks.npy")


# ---- malformed input: one line, exit 2 ----------------------------------------------------
def test_malformed_inputs_are_one_line_errors(capsys, tmp_path):
    data = revisited_world(tmp_path)
    gnd = tmp_path / "gnd_roxtest.pkl"
    nq = len(data["qimlist"])
    (tmp_path / "text.npy").write_text("not numpy")
    np.save(tmp_path / "float.npy", np.zeros((5, nq)))
    np.save(tmp_path / "shape.npy", np.zeros((5, nq + 1), np.int64))
    np.save(tmp_path / "neg.npy", -np.ones((5, nq), np.int64))
    dup = np.tile(np.arange(5)[:, None], (1, nq))
    dup[3, 2] = 0
    np.save(tmp_path / "dup.npy", dup)
    np.save(tmp_path / "ok.npy", np.tile(np.arange(5)[:, None], (1, nq)))
    (tmp_path / "names.txt").write_text("ukbench00000.jpg\n\nukbench00000.jpg\n")
    cases = [
        (["oxford", "--gt", gnd, "--ranks", tmp_path / "text.npy"], "not a readable .npy"),
        (["oxford", "--gt", gnd, "--ranks", tmp_path / "float.npy"], "integer database indices"),
        (["oxford", "--gt", gnd, "--ranks", tmp_path / "shape.npy"], f"{nq} queries"),
        (["oxford", "--gt", gnd, "--ranks", tmp_path / "neg.npy"], "negative database index"),
        (["oxford", "--gt", gnd, "--ranks", tmp_path / "dup.npy"], "query column 2 lists database index 0 twice"),
        (["oxford", "--gt", gnd, "--ranks", tmp_path / "missing.npy"], "not found"),
        (["oxford", "--gt", tmp_path / "nope.pkl", "--ranks", tmp_path / "ok.npy"], "ground truth not found"),
        (["oxford", "--gt", gnd], "give --ranks"),
        (["oxford", "--gt", gnd, "--ranks", tmp_path / "ok.npy", "--database", tmp_path / "ok.npy"], "not both"),
        (["oxford", "--ranks", tmp_path / "ok.npy"], "needs --gt"),
        (["oxford", "--gt", gnd, "--ranks", tmp_path / "ok.npy", "--scores", tmp_path], "--scores is for the pipeline"),
        (["oxford", "--gt", OXFORD, "--ranks", tmp_path / "ok.npy"], "--imlist"),
        (["oxford", "--gt", gnd, "--ranks", tmp_path / "ok.npy", "--imlist", tmp_path / "names.txt"], "not used"),
        (["ukbench", "--gt", tmp_path / "names.txt", "--ranks", tmp_path / "ok.npy"], "names.txt:3: 'ukbench00000.jpg' is listed twice"),
    ]
    (tmp_path / "evil.pkl").write_bytes(pickle.dumps({"imlist": [], "qimlist": [], "gnd": [], "f": print}))
    cases.append((["oxford", "--gt", tmp_path / "evil.pkl", "--ranks", tmp_path / "ok.npy"], "refusing to load"))
    (tmp_path / "sol.csv").write_text("id,pictures\nq,a\n")
    cases.append((["gldv2", "--gt", tmp_path / "sol.csv", "--ranks", tmp_path / "sol.csv"], "missing column 'images'"))
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00id")
    cases.append((["gldv2", "--gt", tmp_path / "bin.csv", "--ranks", tmp_path / "sol.csv"], "not a"))
    jpg = tmp_path / "jpg"
    jpg.mkdir()
    (jpg / "holiday.jpg").write_bytes(b"")
    cases.append((["holidays", "--gt", jpg, "--ranks", tmp_path / "ok.npy"], "like 100000.jpg"))
    for args, message in cases:
        assert message in refused(capsys, *args), args
    # pipeline mode is unchanged: its arguments are still required, protocol ones refused
    assert main(["evaluate", "--scores", str(tmp_path)]) == 2
    assert "required: --landmarks, --descriptors, --selected, --out" in capsys.readouterr().err
    assert main(["evaluate", "--gt", str(gnd)]) == 2
    assert "--gt belongs to --protocol mode" in capsys.readouterr().err


def test_help_explains_the_formats_and_the_command_runs_as_a_program(tmp_path):
    help_text = subprocess.run([sys.executable, "-m", "mining", "evaluate", "--help"], capture_output=True,
                               text=True, check=True).stdout
    for needle in ("--protocol", "gnd_roxford5k.pkl", "retrieval_solution.csv", "ukbenchNNNNN.jpg",
                   "query.jpg 0 img.jpg", "<q>_good/_ok/_junk/_query.txt", "(list length, queries)"):
        assert needle in help_text, needle
    ranked = tmp_path / "ranked"
    ranked.mkdir()
    for q, (pos, _) in oxford_queries().items():
        (ranked / f"{q}.txt").write_text("\n".join(sorted(pos)) + "\n")
    r = subprocess.run([sys.executable, "-m", "mining", "evaluate", "--protocol", "oxford", "--gt", str(OXFORD),
                        "--ranks", str(ranked)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "oxford (original, 55 queries)" and "| original | 100.00 |" in r.stdout
