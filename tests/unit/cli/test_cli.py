"""The CLI (mining/cli/__init__.py): help lists every stage, the console script, `--` passes the rest
through, one convention across verbs, a main input is a required flag."""

import subprocess
import sys

import pytest

from mining.cli import main
from mining.stages import names as stage_names


def test_help_lists_every_stage(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for stage in stage_names():
        assert stage in out


def test_console_script_runs():
    r = subprocess.run([sys.executable, "-m", "mining", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and "mining" in r.stdout


def test_arguments_after_double_dash_pass_through(monkeypatch):
    import argparse

    from mining import cli

    seen = {}

    def fake_register(sub):
        p = sub.add_parser("demo")
        p.set_defaults(func=lambda a: seen.update(tail=a.passthrough) or 0)

    monkeypatch.setattr(cli.stages, "names", lambda: ["demo"])
    monkeypatch.setattr(cli.importlib, "import_module", lambda name: argparse.Namespace(register=fake_register))
    assert cli.main(["demo", "--", "mining", "download", "--host", "{host}"]) == 0
    assert seen["tail"] == ["mining", "download", "--host", "{host}"]


def _verb_parsers() -> dict:
    import argparse

    from mining.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_one_cli_convention_across_verbs():
    """A progress bar is turned off with --no-progress on every verb that has one (no other
    spelling), every input from an earlier stage is a flag (no hidden positional), and every
    verb that reads landmark datasets takes the one `--landmarks [NAME=]GND` flag."""
    verbs = _verb_parsers()
    with_progress = {name for name, p in verbs.items() if any("--no-progress" in a.option_strings for a in p._actions)}
    assert {"ingest", "geofilter", "score", "evaluate", "neardup", "release"} <= with_progress
    for name in with_progress:
        action = next(a for a in verbs[name]._actions if "--no-progress" in a.option_strings)
        assert action.option_strings == ["--no-progress"] and action.dest == "no_progress", name
    # no verb takes a positional input except raw files (ingest) and sub-verbs, shown or hidden
    for name, p in verbs.items():
        positional = [a.dest for a in p._actions if not a.option_strings and
                      not a.__class__.__name__.startswith("_SubParsers")]
        assert positional in ([], ["paths"]), (name, positional)
    serve = next(a for a in verbs["review"]._actions if a.__class__.__name__.startswith("_SubParsers")).choices["serve"]
    parsers = [*verbs.values(), serve]
    landmarks = [a for p in parsers for a in p._actions if "--landmarks" in a.option_strings and a.nargs == "+"]
    assert len(landmarks) == 6  # report's --landmarks is one file: its query crops
    assert len({(a.nargs, a.metavar, a.help.split("; ")[1]) for a in landmarks}) == 1


@pytest.mark.parametrize("verb,name", [("geofilter", "metadata"), ("select", "scores"), ("release", "selected")])
def test_a_main_input_is_a_required_flag(verb, name, capsys):
    p = _verb_parsers()[verb]
    required = {"geofilter": ["--manifest", "m", "--out", "o"], "select": ["--decisions", "d", "--candidates", "c", "--out", "o"],
                "release": ["--images", "i", "--out", "o"]}[verb]
    assert str(getattr(p.parse_args([f"--{name}", "X", *required]), name)) == "X"
    for argv in (["X", *required], required):  # a bare path is refused, as is no input
        with pytest.raises(SystemExit):
            p.parse_args(argv)
    assert f"--{name}" in capsys.readouterr().err
