"""Wrong answers that used to pass with exit 0 (issue 44): descriptors that are not directions, GeM
and token settings that overflow or leave nothing, stores with such rows, and answers that do not
answer the scores' own review queue."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from download_folder import photo_folder
from fixtures.onnx_models import failing_model, scaled_pooled_model, vit_model
from mining.errors import UserError
from mining.methods.onnx_run import gem
from mining.retrieval import descriptors
from mining.settings import options
from mining.stages.describe import stage as describe
from selection import make_inputs, select, write_decisions


def _folder(root: Path, n: int = 6) -> Path:
    return photo_folder(root, n)


def _describe(images: Path, out: Path, params: dict) -> dict:
    opts = replace(options.defaults("describe"), shard_size=2, params={"onnx-global": params})
    return describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=["onnx-global"],
                        out=out, options=opts, progress=False)


@pytest.mark.parametrize("k, why", [(math.nan, "NaN or infinite"), (math.inf, "NaN or infinite"),
                                    (0.0, "all zeros")])
def test_a_model_whose_every_descriptor_is_unusable_stops_describe_naming_the_model(tmp_path, k, why):
    images = _folder(tmp_path / "images")
    model = scaled_pooled_model(tmp_path / "m.onnx", k)
    out = tmp_path / "store"
    with pytest.raises(UserError, match=rf"6 of 6 images could not be described, each by its model {model} \(the "
                                        rf"first error: .*{why}.*the model \(with these settings\) is the cause"):
        _describe(images, out, {"model": model, "whiten": False, "output": "descriptor"})
    assert not (out / "store.json").exists()  # no complete store for score to take
    errors = pq.read_table(out / "failures.parquet").column("error").to_pylist()
    assert len(errors) == 6 and all(why in e for e in errors)


def test_a_few_unusable_images_are_failures_the_rest_is_described(tmp_path):
    """describe_item: an image whose descriptor is not a direction is that image's failure."""
    assert describe.unusable(np.array([1.0, 0.0], np.float32)) is None
    assert "zeros" in describe.unusable(np.zeros(4, np.float32))
    assert "NaN" in describe.unusable(np.array([1.0, np.nan], np.float32))
    assert "NaN" in describe.unusable((np.zeros((2, 128), np.float32), np.array([[np.inf, 0, 0, 0]], np.float32)))
    assert describe.unusable((np.zeros((0, 128), np.float32), np.zeros((0, 4), np.float32))) is None


def test_gem_with_a_large_p_stays_finite_and_equals_the_exact_value():
    f = (np.random.default_rng(0).random((1, 4, 6, 6), dtype=np.float32) * 60).astype(np.float32)
    out = gem(f, 100.0)
    exact = np.array([(np.mean((c.astype(np.float64)) ** 100)) ** (1 / 100) for c in f[0].reshape(4, -1)])
    assert np.isfinite(out).all() and np.allclose(out, exact, rtol=1e-4)
    small = gem(f / 1e4, 100.0)  # underflows f^p
    assert np.all(small > 0) and np.allclose(small, exact / 1e4, rtol=1e-4)
    assert np.array_equal(gem(f, 3.0), gem(f.copy(), 3.0))


def test_prefix_tokens_that_leave_no_patch_token_are_refused_in_one_line(tmp_path):
    images = _folder(tmp_path / "images", n=2)
    model = vit_model(tmp_path / "vit.onnx")
    with pytest.raises(UserError, match=r"prefix_tokens=\d+, but the model outputs \d+ token\(s\)"):
        _describe(images, tmp_path / "store", {"model": model, "whiten": False, "input": "patch_multiple", "patch": 4,
                                              "output": "mean_tokens", "prefix_tokens": 1000})


def test_a_store_with_a_nan_or_zero_row_is_refused_when_read(tmp_path):
    for bad in (np.nan, 0.0):
        store = tmp_path / f"s{bad}"
        rows = np.ones((3, 4), np.float16)
        rows[1] = bad
        descriptors.write_global_shard(store, "00000", ["a", "b", "c"], rows)
        descriptors.write_store_info(store, {"method": "m", "kind": "global", "dim": 4})
        with pytest.raises(UserError, match=r"shard 00000 row 1 \(b\) (has NaN or infinite values|is all zeros)"):
            descriptors.open_store(store).load_all()


# ---- answers and the scores' review queue -------------------------------------------------
def _queue(scores_dir: Path, ids) -> None:
    pq.write_table(pa.table({"landmark": ["tower"] * len(ids), "photo_id": np.asarray(ids, np.int64)}),
                   scores_dir / "review_queue.parquet")


def test_answers_to_another_queue_are_refused(tmp_path, capsys):
    scores_dir, ids, _ = make_inputs(tmp_path)
    _queue(scores_dir, ids[:5])
    dec = write_decisions(tmp_path / "d.parquet", [("tower", int(p), "not_landmark") for p in ids[10:15]])
    assert select(tmp_path, scores_dir, dec, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "answers the review queue (photos digest" in err and "not this run's review queue" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_partial_review_is_refused_unless_allowed_and_then_counted(tmp_path, capsys):
    scores_dir, ids, _ = make_inputs(tmp_path)
    _queue(scores_dir, ids[:8])
    # the export of a review of this very queue in which 3 of its 8 photos were answered
    dec = write_decisions(tmp_path / "d.parquet", [("tower", int(p), "landmark") for p in ids[:3]], queue=ids[:8])
    assert select(tmp_path, scores_dir, dec, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "answers 3 of the review queue's 8 photos; 5 (e.g. photo" in err and "--partial-review allow" in err
    assert select(tmp_path, scores_dir, dec, tmp_path / "out", "--partial-review", "allow", "--n", "5") == 0
    review = json.loads((tmp_path / "out" / "stats.json").read_text())["review"]
    assert review == {"queue_photos": 8, "answered": 3, "unanswered": 5, "answers_label_is_this_queue": True,
                      "partial_review": "allow"}


def test_answers_covering_the_queue_from_a_larger_review_are_taken(tmp_path):
    """A review database that also holds an earlier queue's photos: its answers cover this queue."""
    scores_dir, ids, _ = make_inputs(tmp_path)
    _queue(scores_dir, ids[:4])
    dec = write_decisions(tmp_path / "d.parquet", [("tower", int(p), "not_landmark") for p in ids[:6]])
    assert select(tmp_path, scores_dir, dec, tmp_path / "out", "--n", "5") == 0
    review = json.loads((tmp_path / "out" / "stats.json").read_text())["review"]
    assert review["unanswered"] == 0 and review["answers_label_is_this_queue"] is False


def test_a_scores_folder_with_files_of_two_runs_is_refused(tmp_path, capsys):
    """score writes its three files together, stats.json last, naming the other two's digests; a
    queue from another run beside them (a killed rerun, a copy by hand) is refused by select."""
    from mining.files.checksums import file_sha256

    scores_dir, ids, _ = make_inputs(tmp_path)
    _queue(scores_dir, ids[:3])
    stats = json.loads((scores_dir / "stats.json").read_text())
    stats["files_sha256"] = {n: file_sha256(scores_dir / n) for n in ("scores.parquet", "review_queue.parquet")}
    (scores_dir / "stats.json").write_text(json.dumps(stats))
    dec = write_decisions(tmp_path / "d.parquet", [("tower", int(p), "not_landmark") for p in ids[:3]])
    assert select(tmp_path, scores_dir, dec, tmp_path / "ok", "--n", "5") == 0
    _queue(scores_dir, ids[:4])  # another run's queue
    assert select(tmp_path, scores_dir, dec, tmp_path / "out", "--n", "5") == 2
    err = capsys.readouterr().err
    assert "review_queue.parquet: is not the file" in err and "stats.json describes (files of two runs" in err
    assert not (tmp_path / "out").exists()


# ---- the release gate reads the audit's answers ---------------------------------------------
@pytest.fixture(scope="module")
def leaky_audit(tmp_path_factory):
    from auditing import audited_with_leaks

    root = tmp_path_factory.mktemp("leaky")
    _, audit, honest = audited_with_leaks(root)
    return root, audit, honest


def _release_with(root, audit_json, out, capsys):
    from mining.cli import main

    capsys.readouterr()
    code = main(["release", "--selected", str(audit_json.parent if (audit_json.parent / "distractors.parquet").exists()
                                              else root / "audit"),
                 "--images", str(root / "images"), "--out", str(out), "--audit", str(audit_json), "--no-blur-faces",
                 "--no-kit", "--no-progress", "--audit-over-target", "allow"])
    return code, capsys.readouterr().err


def test_a_self_consistent_edited_audit_json_does_not_publish_the_landmark_photos(leaky_audit, tmp_path, capsys):
    """Leaks set to 0 everywhere, leaks_found emptied, the set before the audit as the released set:
    every count adds up, but the answers beside it found 5."""
    from auditing import forged
    from mining.files.answers import ids_digest

    root, audit, honest = leaky_audit
    selection = pq.read_table(root / "selected" / "distractors.parquet").to_pandas()
    edited = dict(honest, leaks=0, leaks_found=[], near_duplicates_removed=[], removed=0, estimate=0.0,
                  strata=[{**h, "leaks": 0} for h in honest["strata"]], released_set_size=len(selection),
                  released_digest=ids_digest(selection.photo_id))
    folder = tmp_path / "forged"
    folder.mkdir()
    (folder / "distractors.parquet").write_bytes((root / "selected" / "distractors.parquet").read_bytes())
    code, err = _release_with(root, forged(folder, audit, edited), tmp_path / "rel", capsys)
    assert code == 2 and "says 0, but the audit's plan and answers give 5" in err, err
    assert not (tmp_path / "rel").exists()


def test_a_top_level_leak_count_that_is_not_the_strata_sum_is_refused(leaky_audit, tmp_path, capsys):
    from auditing import forged

    root, audit, honest = leaky_audit
    code, err = _release_with(root, forged(tmp_path / "a", audit, dict(honest, leaks=6)), tmp_path / "rel", capsys)
    assert code == 2 and "leaks vs the strata's leaks" in err, err


def test_answers_changed_after_the_estimate_or_missing_are_refused(leaky_audit, tmp_path, capsys):
    import shutil

    root, audit, honest = leaky_audit
    folder = tmp_path / "a"
    folder.mkdir()
    shutil.copyfile(audit / "plan.json", folder / "plan.json")
    (folder / "audit.json").write_text(json.dumps(honest))
    code, err = _release_with(root, folder / "audit.json", tmp_path / "rel", capsys)
    assert code == 2 and "decisions.parquet: the audit's answers (mining review export) must be beside" in err, err
    table = pq.read_table(audit / "decisions.parquet")
    pq.write_table(table.slice(1), folder / "decisions.parquet")  # one answer less: another file
    code, err = _release_with(root, folder / "audit.json", tmp_path / "rel", capsys)
    assert code == 2 and "is not the answers (mining review export) audit.json was estimated from" in err, err
    code, err = _release_with(root, audit / "audit.json", tmp_path / "rel", capsys)  # the honest audit is taken
    assert code == 0, err
    assert "evidence_sha256" in json.loads((audit / "audit.json").read_text())


def test_a_mapping_given_to_param_points_to_the_params_spelling_that_works(tmp_path, capsys):
    import shlex

    from mining.cli import main

    images = _folder(tmp_path / "images", n=2)
    base = ["describe", "--images", str(images), "--set", "candidates", "--method", "rsift-asmk", "--workers", "0",
            "--out", str(tmp_path / "store"), "--no-progress"]
    assert main(base + ["--param", "rsift-asmk:spatial_verification={top_k: 5}"]) == 2
    err = capsys.readouterr().err
    assert "a mapping goes in --params, e.g. --params '{rsift-asmk: {spatial_verification: {top_k: 5}}}'" in err
    suggested = shlex.split(err.split("e.g. ", 1)[1])
    main(base + suggested)  # 2 tiny photos are too few to learn a vocabulary from; the settings are taken:
    assert "VALUE must be" not in capsys.readouterr().err
    plan = json.loads((tmp_path / "store" / "describe.json").read_text())  # what the store is being made with
    assert plan["params"]["spatial_verification"]["top_k"] == 5


@pytest.mark.parametrize("case, why", [("nan", "none of the 8 sampled images gave a usable descriptor"),
                                       ("copies", "they are all the same")])
def test_whitening_learned_from_unusable_or_identical_descriptors_is_one_line_naming_the_store(tmp_path, case, why):
    """PCA-whitening learned from no usable descriptor was a ValueError traceback (NaN ones a
    LinAlgError); from descriptors that are all the same (copies of one photo; a model that
    ignores its image) it blew the noise up a million times into zero descriptors. Either is one
    line naming the store and what to do."""
    images = _folder(tmp_path / "images", n=8)
    if case == "copies":
        jpgs = sorted(images.rglob("*.jpg"))
        for p in jpgs[1:]:
            p.write_bytes(jpgs[0].read_bytes())
    model = scaled_pooled_model(tmp_path / "m.onnx", math.nan if case == "nan" else 1.0)
    out = tmp_path / "store"
    with pytest.raises(UserError, match=rf"^{out}: onnx-global: cannot learn the whitening .*{why}.*whiten: false"):
        _describe(images, out, {"model": model, "whiten": True, "whiten_dim": 2, "output": "descriptor"})


def test_pca_whitening_refuses_descriptors_it_cannot_learn_from():
    from mining.methods.base import fit_pca_whitening

    x = np.random.default_rng(0).random((40, 8))
    assert np.isfinite(fit_pca_whitening(x, 4)["pca_proj"]).all()
    for bad, why in [(np.full((40, 8), 1e200), "NaN, infinite or too large"), (np.tile(x[0], (40, 1)), "all the same")]:
        with pytest.raises(UserError, match=f"^cnn-gem: cannot learn the whitening from 40 candidate descriptors: .*{why}"):
            fit_pca_whitening(bad, 4, who="cnn-gem")


def test_a_model_that_fails_on_every_image_is_named_as_the_cause(tmp_path):
    """A model whose graph raises at run time for every input was filed as one failure per image;
    the stop names the model file as the cause, with its first error (the images decode)."""
    images = _folder(tmp_path / "images")
    model = failing_model(tmp_path / "broken.onnx")
    out = tmp_path / "store"
    with pytest.raises(UserError, match=rf"^onnx-global: 6 of 6 images could not be described, each by its model "
                                        rf"{model} \(the first error: Fail: .*Reshape.*\), and the images decode: the "
                                        r"model \(with these settings\) is the cause, not the images"):
        _describe(images, out, {"model": model, "whiten": False, "output": "descriptor"})
    assert not (out / "store.json").exists()
