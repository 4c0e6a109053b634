"""Settings are what their key says, and a refusal says which key and what it allows:

- an integer setting given as 1.0 or 50.0 (`review: {budget: 1.0}`, `score: {review_top: 50.0}`)
  is refused when the manifest is read, naming the key; it used to pass the schema (JSON
  Schema's `integer` takes 50.0) and crash score deep inside ("Partition index must be integer");
- a nullable setting with a value out of range (`--review-budget 0`, `budget: -1`, `hashes: ''`)
  says what is wrong with the value and what the key allows, not "is not of type 'null'";
- a plain number YAML 1.1 reads as another (`010`: octal 8; `1:30`: base 60, 90) is refused,
  naming the line, in a manifest and as a flag's value.
"""

from __future__ import annotations

import re

import pytest
import yaml
from snakerun import REPO

from mining.settings import manifest, options
from mining.cli import main
from mining.errors import UserError
from mining.files.yamlfile import flag_value

DEMO = REPO / "manifests" / "demo.yaml"


def _manifest(tmp_path, **edits):
    m = yaml.safe_load(DEMO.read_text())
    for key, value in edits.items():
        m.setdefault(key, {}).update(value) if isinstance(value, dict) else m.update({key: value})
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(m, sort_keys=False))
    return path


@pytest.mark.parametrize("section,key,value", [("review", "budget", 1.0), ("score", "review_top", 50.0),
                                               ("review", "min_per_landmark", 2.0), ("demo", "seed", 0.0),
                                               ("download", "threads", True)])
def test_an_integer_setting_given_as_a_float_is_refused_at_load_naming_the_key(tmp_path, section, key, value):
    path = _manifest(tmp_path, **{section: {key: value}})
    with pytest.raises(UserError) as err:
        manifest.load(path)
    assert f"{section}.{key}:" in str(err.value) and repr(value) in str(err.value)
    assert "line" in str(err.value)
    with pytest.raises(UserError, match=f"{section}.{key}:"):  # and the same as a stage reads its section
        options.build(section, {key: value})


def test_a_whole_integer_is_still_an_integer(tmp_path):
    assert options.build("review", {"budget": 1}).budget == 1
    assert options.build("score", {"review_top": 50}).review_top == 50


@pytest.mark.parametrize("section,value,words", [
    ({"review": {"budget": -1}}, "review.budget", "-1 is less than the minimum of 1 (allowed: an integer >= 1, or null)"),
    ({"review": {"budget": 1.5}}, "review.budget", "1.5 is not allowed (allowed: an integer >= 1, or null)"),
    ({"hashes": ""}, "hashes", "'' should be non-empty (allowed: a path, or null)"),
    ({"evaluate": {"n": 2.0}}, "evaluate.n", "must be an integer (a whole number, no decimal point) or null, got 2.0"),
])
def test_a_nullable_setting_out_of_range_says_what_the_key_allows(tmp_path, section, value, words):
    path = _manifest(tmp_path, **section)
    with pytest.raises(UserError) as err:
        manifest.load(path)
    assert f"{value}: {words}" in str(err.value)
    assert "not of type 'null'" not in str(err.value)


def test_review_budget_zero_on_the_command_line_names_the_flag(tmp_path, capsys):
    rc = main(["score", "--landmarks", str(tmp_path / "gnd.pkl"), "--descriptors", str(tmp_path / "d"),
               "--out", str(tmp_path / "out"), "--review-budget", "0", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "--review-budget 0 is less than the minimum of 1 (allowed: an integer >= 1, or null)" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_number_setting_is_finite(tmp_path, value):
    """NaN passes every bound of the schema (each comparison is false): `max_leak_rate: .nan` was
    taken, and a release's gate compared its bound with NaN."""
    path = _manifest(tmp_path)
    path.write_text(path.read_text() + f"audit:\n  max_leak_rate: {value}\n")  # (no audit section before)
    with pytest.raises(UserError, match=r"audit.max_leak_rate: must be a finite number, got -?(nan|inf)"):
        manifest.load(path)
    with pytest.raises(UserError, match="must be a finite number"):
        options.build("audit", {"confidence": float(value.replace(".", ""))})


def test_a_number_yaml_reads_as_text_says_so(tmp_path):
    path = _manifest(tmp_path)
    path.write_text(path.read_text() + "audit:\n  max_leak_rate: 1e-2\n")
    with pytest.raises(UserError, match=r"got '1e-2' \(text, not a number: unquote it; YAML reads 1e-2"):
        manifest.load(path)


@pytest.mark.parametrize("text,read_as", [("010", "8"), ("-07", "-7"), ("1:30", "90"), ("1:00:00", "3600")])
def test_a_number_yaml_would_read_as_another_is_refused_naming_its_line(tmp_path, text, read_as):
    """YAML 1.1 reads a plain 010 as octal 8 and 1:30 as base 60 (90): `review_top: 010` would
    silently queue 8 per landmark, a SLURM config's `walltime: 1:00:00` would be 3,600 (minutes)."""
    path = tmp_path / "m.yaml"
    path.write_text(re.sub(r"(?m)^  review_top: .*$", f"  review_top: {text}", DEMO.read_text(), count=1))
    assert f"review_top: {text}" in path.read_text()
    with pytest.raises(UserError) as err:
        manifest.load(path)
    line = path.read_text().splitlines().index(f"  review_top: {text}") + 1
    assert f"line {line}: {text}: YAML reads this as" in str(err.value) and f"({read_as})" in str(err.value)
    with pytest.raises(UserError, match=f"--review-top: {text}: YAML reads this as"):  # the same as a flag
        flag_value(text, "--review-top")


def test_numbers_written_plainly_and_quoted_text_are_read_as_written():
    written = ("10", "0", "0.5", "-7", "1_000", "'010'", '"1:00:00"', "01:00:00", "auto")
    assert [flag_value(t, "--x") for t in written] == [10, 0, 0.5, -7, 1000, "010", "1:00:00", "01:00:00", "auto"]
