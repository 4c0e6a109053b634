"""The release gate recomputes: `mining release --audit` derives the leak bound from the audit's
counts and compares it with its own target; what audit.json says of itself is not evidence.

- an over-target audit edited to `"passes": true`, to a lower bound, to a looser target or a lower
  confidence is refused, and the card never says "met" for it;
- a release of 0 images is an error that says why (the audit removed every image; no image
  under a licence the release may publish), and nothing is written.
"""

from __future__ import annotations

import json

import pytest
from auditing import answer, audited_with_leaks, draw, estimate, forged as forge, selection

from mining.cli import main
from mining.errors import UserError
from releasing import OVER_TARGET_ALLOWED, run_release

UNKNOWN = ("All Rights Reserved", "")


@pytest.fixture(scope="module")
def over_target(tmp_path_factory):
    """A stratified audit of 400 images that found 5 landmark images: its bound is far above 1 %."""
    root = tmp_path_factory.mktemp("over")
    _, audit, honest = audited_with_leaks(root)
    assert honest["method"] == "korn-graubard" and honest["released_upper"] > 0.01 and not honest["passes"]
    return root, audit, honest


@pytest.mark.parametrize("edit", [
    {"passes": True},
    {"passes": True, "upper": 0.004, "released_upper": 0.001, "estimate": 0.0},
    {"passes": True, "max_leak_rate": 0.5},
    {"passes": True, "confidence": 0.5},
    {"passes": True, "leaks": 0, "strata": "no leaks"},
], ids=["passes", "bound", "target", "confidence", "counts"])
def test_an_edited_audit_json_does_not_open_the_gate(over_target, tmp_path, edit, capsys):
    root, audit, honest = over_target
    forged = dict(honest, **edit)
    if edit.get("strata") == "no leaks":  # the counts edited too, but the leaks found are still listed
        forged["strata"] = [{**s, "leaks": 0} for s in honest["strata"]]
    forge(tmp_path, audit, forged)
    out = tmp_path / "rel"
    code = main(["release", "--selected", str(audit), "--images", str(root / "images"), "--out", str(out),
                 "--audit", str(tmp_path / "audit.json"), "--no-blur-faces", "--no-kit", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert "above the target" in err or "do not add up" in err or "audit.json was edited" in err, err
    assert not out.exists()


def test_the_honest_audit_told_to_go_on_states_the_recomputed_bound(over_target, tmp_path):
    root, audit, honest = over_target
    forged = dict(honest, passes=True, upper=0.004, released_upper=0.001)  # (an edited draw target: refused)
    forge(tmp_path, audit, forged)
    stats = run_release(audit, root / "images", tmp_path / "rel", blur=False, audit=tmp_path / "audit.json",
                        target=OVER_TARGET_ALLOWED)
    card = (tmp_path / "rel" / "README.md").read_text()
    assert f"at most **{100 * honest['released_upper']:.2f} %**" in card
    assert "target 1.00 %: NOT met" in card and ": met" not in card
    assert stats["audit"]["passes"] is False and stats["audit"]["max_leak_rate"] == 0.01


def test_a_release_the_audit_emptied_is_an_error_that_says_why(tmp_path, capsys):
    sel, _ = selection(tmp_path, 30, images=True)
    audit = tmp_path / "audit"
    draw(sel, audit)  # a census: every image is checked
    answers = answer(audit / "audit_queue.parquet", audit / "audit.sqlite", audit / "decisions.parquet", default="u")
    assert estimate(sel, audit, answers) == 0  # `unclear` counts as a leak: every image leaves the set
    assert json.loads((audit / "audit.json").read_text())["released_set_size"] == 0
    capsys.readouterr()
    code = main(["release", "--selected", str(audit), "--images", str(tmp_path / "images"), "--out",
                 str(tmp_path / "rel"), "--audit", str(audit / "audit.json"), "--no-blur-faces", "--no-kit", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "0 images" in err and "audit removed all 30" in err, err
    assert not (tmp_path / "rel").exists()


def test_a_release_with_no_publishable_licence_is_an_error_that_says_why(tmp_path):
    sel, _ = selection(tmp_path, 6, images=True, licence=UNKNOWN)
    with pytest.raises(UserError, match=r"0 images.*6 of 6 .*licence"):
        run_release(sel, tmp_path / "images", tmp_path / "rel", blur=False)
    assert not (tmp_path / "rel").exists()


def test_the_reports_audit_section_states_the_recomputed_bound(over_target, tmp_path):
    from mining.stages.report.audit import leak_audit
    from mining.stages.report.common import Inputs

    root, audit, honest = over_target
    folder = tmp_path / "audit"
    folder.mkdir()
    (folder / "distractors.parquet").write_bytes((audit / "distractors.parquet").read_bytes())
    (folder / "audit.json").write_text(json.dumps(dict(honest, passes=True, upper=0.004, released_upper=0.001)))
    html = leak_audit(Inputs(audit=folder))
    assert f"<b>{100 * honest['released_upper']:.2f} %</b>" in html and "NOT met" in html, html[:500]
    (folder / "audit.json").write_text(json.dumps(dict(honest, leaks_found=honest["leaks_found"][1:])))
    assert "do not add up" in leak_audit(Inputs(audit=folder))


@pytest.mark.parametrize("where", ["run", "selected", "images"])
def test_a_release_never_replaces_a_folder_that_holds_its_inputs(tmp_path, capsys, where):
    """The release replaces its --out folder whole: `--out` naming the run's folder deleted the
    downloaded images and the selection (and every other file there), exit 0."""
    sel, _ = selection(tmp_path, 6, images=True)
    (tmp_path / "precious.txt").write_text("votes")
    before = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    out = {"run": tmp_path, "selected": sel, "images": tmp_path / "images"}[where]
    capsys.readouterr()
    code = main(["release", "--selected", str(sel), "--images", str(tmp_path / "images"), "--out", str(out),
                 "--no-blur-faces", "--no-kit", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "is replaced whole" in err, err
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == before


def test_a_release_replaces_only_an_earlier_release_or_an_empty_folder(tmp_path, capsys):
    """An --out folder of other files (no release.parquet) was deleted whole, exit 0."""
    sel, _ = selection(tmp_path, 6, images=True)
    out = tmp_path / "docs"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    args = ["release", "--selected", str(sel), "--images", str(tmp_path / "images"), "--no-blur-faces", "--no-kit",
            "--no-progress", "--out"]
    capsys.readouterr()
    assert main(args + [str(out)]) == 2
    err = capsys.readouterr().err
    assert "no release.parquet" in err and len(err.strip().splitlines()) == 1, err
    assert (out / "thesis.tex").read_text() == "years of work"
    (tmp_path / "empty").mkdir()
    assert main(args + [str(tmp_path / "empty")]) == 0  # an empty folder, then that release again: taken
    assert main(args + [str(tmp_path / "empty")]) == 0 and (tmp_path / "empty" / "release.parquet").is_file()
