"""The release gate takes audit.json's counts only as `mining audit estimate` writes them:

- every count and photo id is a JSON integer >= 0: a negative leak count (which lowered the
  recomputed bound: 1.30 % against the honest 1.64 %), a float, text or infinity (a traceback)
  is refused in one line;
- the strata and their sample sizes are the draw's design for the set's size at the target and
  confidence the audit states: an audit edited to say every image was checked (a census, bound
  0.00 %, "met") is refused, the honest one still gates as before.
"""

from __future__ import annotations

import json

import pytest
from auditing import audited_with_leaks, draw, forged as forge, selection

from mining.cli import main


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """A stratified audit of 400 images that found 5 landmark images (above a 1 % target)."""
    root = tmp_path_factory.mktemp("counts")
    _, audit, honest = audited_with_leaks(root)
    assert honest["method"] == "korn-graubard" and honest["strata"][0]["leaks"] == 5
    return root, audit, honest


def _release(root, audit, forged, tmp_path, capsys, *extra):
    forge(tmp_path, audit, forged)
    capsys.readouterr()
    code = main(["release", "--selected", str(audit), "--images", str(root / "images"), "--out", str(tmp_path / "rel"),
                 "--audit", str(tmp_path / "audit.json"), "--no-blur-faces", "--no-kit", "--no-progress", *extra])
    return code, capsys.readouterr().err


def _strata(honest, **per):
    return [{**s, **{k: f(h, s) for k, f in per.items()}} for h, s in enumerate(honest["strata"])]


@pytest.mark.parametrize("edit", [
    lambda a: {"strata": _strata(a, leaks=lambda h, s: 7 if h == 0 else (-2 if h == 3 else s["leaks"]))},
    lambda a: {"strata": _strata(a, leaks=lambda h, s: float(s["leaks"]))},
    lambda a: {"strata": _strata(a, sampled=lambda h, s: s["sampled"] + 0.9)},
    lambda a: {"strata": _strata(a, leaks=lambda h, s: str(s["leaks"]))},
    lambda a: {"strata": _strata(a, sampled=lambda h, s: 1e999 if h == 0 else s["sampled"])},
    lambda a: {"leaks_found": [str(p) for p in a["leaks_found"]]},
], ids=["negative", "float", "fraction", "text", "infinity", "ids-as-text"])
def test_counts_that_are_not_whole_numbers_are_refused_in_one_line(audited, tmp_path, capsys, edit):
    root, audit, honest = audited
    code, err = _release(root, audit, {**honest, **edit(honest)}, tmp_path, capsys, "--audit-over-target", "allow")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "a whole number >= 0" in err, err
    assert not (tmp_path / "rel").exists()


def test_an_audit_edited_into_a_census_is_refused(audited, tmp_path, capsys):
    root, audit, honest = audited
    forged = {**honest, "strata": _strata(honest, sampled=lambda h, s: s["size"])}
    code, err = _release(root, audit, forged, tmp_path, capsys)
    assert code == 2 and "do not add up" in err and "design" in err, err
    assert not (tmp_path / "rel").exists()
    code, err = _release(root, audit, honest, tmp_path, capsys)  # the honest counts: gated on their bound
    assert code == 2 and "1.64 %" in err and "above the target" in err, err


def test_a_confidence_of_one_half_estimates_without_a_division_by_zero():
    """At confidence 0.5 both t quantiles of Korn–Graubard's factor are 0: 0/0 printed a
    RuntimeWarning on the release's stderr and made the factor NaN (min() then took n by chance)."""
    import warnings

    from mining.publishing import leakbound

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = leakbound.estimate([20, 60, 120, 200], [20, 60, 100, 130], [5, 0, 0, 0], 0.5)
    assert result["method"] == "korn-graubard" and 0 < result["n_eff"] <= 310
    assert result["estimate"] < result["upper"] < 1


@pytest.mark.parametrize("rate", ["1e-17", "1e-300"])
def test_a_target_below_float_precision_draws_a_census(tmp_path, capsys, rate):
    """log(1 - 1e-17) is 0: `audit draw --max-leak-rate 1e-17` was a ZeroDivisionError traceback."""
    sel, _ = selection(tmp_path, 50)
    sampled = draw(sel, tmp_path / "audit", "--max-leak-rate", rate)
    plan = json.loads((tmp_path / "audit" / "plan.json").read_text())
    assert plan["census"] and len(sampled) == 50 and plan["zero_leak_size"] > 10**16
