"""Held-out methods (manifest `evaluate: held_out`): checked when the manifest loads, told apart
from the mining methods by the scores themselves, marked in every table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from mining.errors import UserError
from mining.publishing.result import row_label, summary_markdown
from mining.settings import manifest
from mining.stages.evaluate.stage import held_out_methods

from paths import ROOT


def _demo(**evaluate):
    m = yaml.safe_load((ROOT / "manifests/demo.yaml").read_text())
    m["evaluate"] = {**m.get("evaluate", {}), **evaluate}
    return m


def test_the_demo_holds_out_a_network_with_its_own_settings():
    m = manifest.validate(_demo(), "demo.yaml")
    assert m["evaluate"]["held_out"] == ["cnn-gem-lite2"] and "cnn-gem-lite2" not in m["methods"]
    assert m["describe"]["params"]["cnn-gem-lite2"] == {"backbone": "lite2"}


@pytest.mark.parametrize("held, words", [
    (["cnn-gem"], "'cnn-gem' is in methods too: a held-out method never mines"),
    (["no-such-method"], "unknown method 'no-such-method'"),
])
def test_a_held_out_method_that_mines_or_does_not_exist_is_one_line_naming_the_key(held, words):
    with pytest.raises(UserError) as err:
        manifest.validate(_demo(held_out=held), "demo.yaml")
    assert "evaluate.held_out[0]" in str(err.value) and words in str(err.value)


def test_settings_of_a_held_out_method_are_checked_as_a_mining_methods():
    m = _demo()
    m["describe"]["params"]["cnn-gem-lite2"] = {"backbone": "lite7"}
    with pytest.raises(UserError) as err:
        manifest.validate(m, "demo.yaml")
    assert "cnn-gem-lite2" in str(err.value) and "backbone" in str(err.value)


def _scores(tmp_path: Path, methods: list[str]) -> Path:
    (tmp_path / "scores").mkdir()
    (tmp_path / "scores/stats.json").write_text(json.dumps({"methods": {m: {} for m in methods}}))
    return tmp_path / "scores"


def test_held_out_means_not_scored_whatever_the_manifest_says(tmp_path):
    scores = _scores(tmp_path, ["cnn-gem", "rsift-asmk"])
    desc = [tmp_path / "DESC" / m for m in ("cnn-gem", "rsift-asmk", "cnn-gem-lite2", "mine")]
    # a method given only to evaluate is held out too: it did not choose the set
    assert held_out_methods(desc, scores, ["cnn-gem-lite2"]) == ["cnn-gem-lite2", "mine"]
    with pytest.raises(UserError, match="held-out method 'cnn-gem' took part in mining"):
        held_out_methods(desc, scores, ["cnn-gem"])
    with pytest.raises(UserError, match=r"held-out method 'other': give its folder too \(--descriptors DESC/other\)"):
        held_out_methods(desc, scores, ["other"])
    # scores that name no method: no method is said to be held out but those declared so
    (scores / "stats.json").write_text(json.dumps({"landmarks_fingerprint": "x"}))
    assert held_out_methods(desc, scores, ["cnn-gem-lite2"]) == ["cnn-gem-lite2"]


def test_every_table_marks_the_held_out_rows_and_says_the_sentence():
    ci = {"mined_minus_random": {"diff": -0.1, "ci": [-0.12, -0.08], "p_not_lower": 0.0}}
    rows = {"none": {"mAP": 0.6}, "random": {"mAP": 0.55, "mAP_std": 0.01}, "mined": {"mAP": 0.45}, "all": {"mAP": 0.44}}
    rep = {"landmarks": {"name": "demo", "queries": 10, "database": 75}, "n": 30, "pool": 165, "seeds": [0],
           "setups": ["medium"], "methods": ["cnn-gem", "lite2"], "held_out": ["lite2"],
           "results": {m: {"medium": rows} for m in ("cnn-gem", "lite2")},
           "ci": {m: {"medium": ci} for m in ("cnn-gem", "lite2")}, "bootstrap": {"level": 0.95}}
    text = summary_markdown(rep)
    assert "| lite2 (held out) | Medium |" in text and "| cnn-gem | Medium |" in text
    assert "the mined 30 cost lite2, which took no part in mining (held out), 10.0 Medium mAP points more" in text
    assert row_label(rep, "lite2+αQE") == "lite2+αQE (held out)" and row_label(rep, "cnn-gem+αQE") == "cnn-gem+αQE"
