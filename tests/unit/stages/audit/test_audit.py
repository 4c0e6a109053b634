"""mining audit and mining.publishing.leakbound: the sample size from the target, the strata's weights, the
bound's coverage on selections with leaks planted at a known rate, the removal of a found leak
and its near-duplicates, and release's refusal of a set whose bound is above the target."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from PIL import Image
from scenes import scene
from scipy.stats import beta
from selection import write_decisions

from mining.publishing import leakbound
from mining.cli import main
from mining.errors import UserError
from mining.settings.layout import image_relpath
from releasing import OVER_TARGET_ALLOWED, run_release
from mining.stages.review import database, queue_import
from mining.stages.review.app import create_app


def test_sample_size_from_the_target():
    n = leakbound.zero_leak_size(0.01, 0.95)
    assert n == 299  # 0 landmark images in 299 bounds the rate below 1 % at 95 %
    assert leakbound.clopper_pearson_upper(0, n, 0.95) <= 0.01 < leakbound.clopper_pearson_upper(0, n - 1, 0.95)
    assert leakbound.zero_leak_size(0.05, 0.95) == 59
    plan = leakbound.plan(20_000, 0.01, 0.95)
    assert plan["strata"] == [1000, 3000, 6000, 10000]
    assert not plan["census"] and plan["kish_neff"] >= 299 and sum(plan["sample"]) < 400
    # the hardest stratum is sampled at a higher rate than the easiest one
    rates = [a / s for a, s in zip(plan["sample"], plan["strata"])]
    assert rates == sorted(rates, reverse=True) and rates[0] > 2 * rates[-1]
    # with no leak found, the stratified bound (Kish's effective size) meets the target
    e = leakbound.estimate(plan["strata"], plan["sample"], [0] * 4, 0.95)
    assert e["method"] == "korn-graubard" and e["upper"] <= 0.01
    small = leakbound.plan(30, 0.01, 0.95)  # a set smaller than the sample: every image is checked
    assert small["census"] and small["sample"] == small["strata"] and sum(small["sample"]) == 30


def test_the_strata_weights_make_the_estimate_for_the_whole_set():
    sizes, sampled = [50, 150, 300, 500], [10, 30, 30, 30]
    e = leakbound.estimate(sizes, sampled, [0, 0, 0, 3], 0.95)
    assert e["estimate"] == pytest.approx(0.5 * 3 / 30)  # not 3 / 100, the unweighted share
    e = leakbound.estimate(sizes, sampled, [5, 0, 0, 0], 0.95)
    assert e["estimate"] == pytest.approx(0.05 * 5 / 10)
    one = leakbound.estimate([1000], [300], [2], 0.95)  # unstratified: exact Clopper–Pearson
    assert one["method"] == "clopper-pearson" and one["upper"] == pytest.approx(beta.ppf(0.95, 3, 298))
    census = leakbound.estimate([4, 6], [4, 6], [1, 0], 0.95)
    assert census["method"] == "census" and census["upper"] == census["estimate"] == pytest.approx(0.1)


def _coverage(n_set, rate, concentrated, seeds):
    """Share of seeds whose bound covers the planted share of landmark images in the set."""
    design = leakbound.plan(n_set, 0.01, 0.95)
    covered = 0
    for seed in range(seeds):
        rng = np.random.default_rng(10_000 + seed)
        if concentrated:  # landmark images among the hardest, as a review misses them
            p = np.exp(-np.arange(n_set) / (0.15 * n_set))
            leak = rng.random(n_set) < np.minimum(1, p / p.sum() * rate * n_set)
        else:
            leak = rng.random(n_set) < rate
        pos = leakbound.draw(n_set, design["strata"], design["sample"], seed)
        e = leakbound.estimate(design["strata"], design["sample"], [int(leak[p].sum()) for p in pos], 0.95)
        covered += e["upper"] >= leak.mean()
    return covered / seeds


@pytest.mark.parametrize("rate,concentrated", [(0.01, False), (0.03, False), (0.02, True)])
def test_the_bound_covers_the_planted_rate_in_95_percent_of_seeds(rate, concentrated):
    assert _coverage(5_000, rate, concentrated, seeds=300) >= 0.95


def _selection(tmp_path, n):
    rng = np.random.default_rng(0)
    ids = rng.choice(10**7, n, replace=False).astype(np.int64)
    sel = tmp_path / "selected"
    sel.mkdir()
    frame = pd.DataFrame({"rank": np.arange(1, n + 1), "photo_id": ids, "path": [image_relpath(int(i)) for i in ids],
                          "score": np.linspace(10, 1, n), "closest_landmark": ["tower"] * n})
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sel / "distractors.parquet")
    return sel, ids


def test_a_found_leak_and_its_near_duplicates_leave_the_set(tmp_path, capsys):
    sel, ids = _selection(tmp_path, 2000)
    audit = tmp_path / "audit"
    assert main(["audit", "draw", "--selected", str(sel), "--seed", "3", "--out", str(audit)]) == 0
    queue = pq.read_table(audit / "audit_queue.parquet")
    assert queue.schema.metadata[b"queue_kind"] == b"audit"
    plan = json.loads((audit / "plan.json").read_text())
    sampled = [p for s in plan["sampled_ids"] for p in s]
    assert sorted(queue.column("photo_id").to_pylist()) == sorted(sampled) and len(set(sampled)) == len(sampled)
    # its own review queue: the app knows it is the audit's (it asks about any landmark)
    con = database.connect(tmp_path / "audit.sqlite", create=True)
    assert queue_import.import_queue(con, audit / "audit_queue.parquet", scores_fingerprint=None).added == len(sampled)
    (tmp_path / "imgs").mkdir()
    app = TestClient(create_app(db_path=tmp_path / "audit.sqlite", images=tmp_path / "imgs", images_required=False),
                     base_url="http://127.0.0.1:8765")
    listed = app.get("/api/landmarks").json()
    assert listed["kind"] == "audit" and listed["total"] == len(sampled)
    leak = plan["sampled_ids"][0][0]  # a landmark image among the hardest
    twin, other = (int(i) for i in ids[~np.isin(ids, sampled)][:2])  # unsampled: its near-duplicate, a stranger
    pq.write_table(pa.table({"photo_id": pa.array([leak, twin, other], pa.int64()),
                             "group": pa.array([min(leak, twin)] * 2 + [other], pa.int64())}), tmp_path / "nd.parquet")
    decisions = write_decisions(tmp_path / "d.parquet", [("tower", p, "landmark" if p == leak else "not_landmark")
                                                         for p in sampled[1:]], kind="audit", queue=sampled)
    code = main(["audit", "estimate", "--selected", str(sel), "--decisions", str(decisions), "--audit", str(audit),
                 "--out", str(audit)])  # one sampled photo has no answer: refused in one line
    assert code == 2 and "1 of 331 audited photos have no answer" in capsys.readouterr().err
    write_decisions(decisions, [("tower", p, "landmark" if p == leak else "not_landmark") for p in sampled],
                    kind="audit")
    assert main(["audit", "estimate", "--selected", str(sel), "--decisions", str(decisions), "--audit", str(audit),
                 "--near-duplicates", str(tmp_path / "nd.parquet"), "--out", str(audit)]) == 0
    result = json.loads((audit / "audit.json").read_text())
    assert result["leaks_found"] == [leak] and result["near_duplicates_removed"] == [twin]
    kept = pq.read_table(audit / "distractors.parquet").column("photo_id").to_pylist()
    assert len(kept) == 1998 and leak not in kept and twin not in kept and other in kept
    assert result["leaks"] == 1 and result["strata"][0]["leaks"] == 1
    assert result["estimate"] == pytest.approx(0.05 / plan["sample"][0])  # one leak, weighted by its stratum


def _release_world(tmp_path, n, images=True):
    sel, ids = _selection(tmp_path, n)
    (tmp_path / "images").mkdir()
    for i in ids[:n if images else 0]:
        path = tmp_path / "images" / image_relpath(int(i))
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(scene(int(i), 64, 48)).save(path, "JPEG")
    frame = pq.read_table(sel / "distractors.parquet").to_pandas()
    frame["license_name"] = "Attribution License"
    frame["license_url"] = "http://creativecommons.org/licenses/by/2.0/"
    frame["user_nsid"] = "x@N00"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sel / "distractors.parquet")
    return sel


def _audit(tmp_path, sel, leaks):
    """draw + estimate with the first `leaks` sampled photos answered `landmark`."""
    audit = tmp_path / "audit"
    assert main(["audit", "draw", "--selected", str(sel), "--out", str(audit)]) == 0
    sampled = [p for s in json.loads((audit / "plan.json").read_text())["sampled_ids"] for p in s]
    decisions = write_decisions(tmp_path / "d.parquet", [("tower", p, "landmark" if k < leaks else "not_landmark")
                                                         for k, p in enumerate(sampled)], kind="audit")
    assert main(["audit", "estimate", "--selected", str(sel), "--decisions", str(decisions), "--audit", str(audit),
                 "--out", str(audit)]) == 0
    return audit, json.loads((audit / "audit.json").read_text())


def test_release_refuses_a_set_whose_bound_is_above_the_target(tmp_path):
    sel = _release_world(tmp_path, 600, images=False)
    audit, result = _audit(tmp_path, sel, 5)  # 5 of ~330 sampled: the bound is far above 1 %
    assert result["method"] == "korn-graubard" and result["upper"] > result["released_upper"] > 0.01
    assert result["released_upper"] == pytest.approx((result["upper"] * 600 - 5) / 595)
    assert not result["passes"]
    with pytest.raises(UserError, match="above the target"):
        run_release(audit, tmp_path / "images", tmp_path / "rel", blur=False, audit=audit / "audit.json")
    with pytest.raises(UserError, match="not the set the audit left"):  # the selection before the audit
        run_release(sel, tmp_path / "images", tmp_path / "rel", blur=False, audit=audit / "audit.json",
                    target=OVER_TARGET_ALLOWED)
    with pytest.raises(UserError, match="image of photo .* not found"):  # told otherwise: past the gate
        run_release(audit, tmp_path / "images", tmp_path / "rel", blur=False, audit=audit / "audit.json",
                    target=OVER_TARGET_ALLOWED)
    words = leakbound.sentence(result)  # what the card and the report say
    assert f"at most **{100 * result['released_upper']:.2f} %** in the released set" in words and "NOT met" in words


def test_a_census_that_removed_its_leaks_releases_a_clean_set(tmp_path):
    sel = _release_world(tmp_path, 40)  # 40 images: every one is checked
    audit, result = _audit(tmp_path, sel, 1)
    assert result["method"] == "census" and result["upper"] == pytest.approx(1 / 40)
    assert result["released_upper"] == 0 and result["passes"]
    stats = run_release(audit, tmp_path / "images", tmp_path / "rel", blur=False, audit=audit / "audit.json")
    card = (tmp_path / "rel" / "README.md").read_text()
    assert stats["released"] == 39 and "estimated leak rate 2.50 % of the set as selected" in card
    assert "at most **0.00 %** in the released set" in card and "target 1.00 %: met" in card
    assert "| removed by the leak audit (landmark images found, their near-duplicates) | 1 |" in card
