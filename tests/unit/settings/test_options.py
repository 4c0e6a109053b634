"""One definition per setting: every key of the manifest schema has its default
there only, and the CLI and the stage's options take that default, the manifest's value, and a
flag's value over it. The walk covers every section and every key: a key added to the schema
without an options field, a flag or the workflow reading it fails here."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from mining.settings import manifest, options
from mining.cli import build_parser
from mining.settings.exclusion import parse_section
from mining.settings.geoshapes import load_geojson
from mining.files.yamlfile import Locator

from paths import ROOT as REPO

SCHEMA = manifest.schema()
OBJECT_SECTIONS = sorted(k for k, v in SCHEMA["properties"].items() if v.get("type") == "object" and k != "geofilter")
KEYS = [(s, k) for s in OBJECT_SECTIONS for k in SCHEMA["properties"][s]["properties"]]

# A value other than the default, for keys whose schema a generic rule cannot invent one for.
OTHER = {
    ("demo", "faults"): {"slow": 0.5},
    ("describe", "params"): {"cnn-gem": {"whiten_dim": 64}},
    ("download", "host"): "http://example.org",
    ("download", "sources"): [{"kind": "local", "path": "/tmp"}],
    ("dask", "scheduler"): "tcp://127.0.0.1:8786",
    ("dask", "slurm"): "dask.yaml",
    ("evaluate", "n"): 7,
    ("evaluate", "random_seeds"): [5],
    ("evaluate", "setups"): ["hard"],
    ("evaluate", "held_out"): ["rsift-vlad"],
    ("release", "licenses"): "commercial",
    ("review", "decisions"): "d.parquet",
    ("review", "budget"): 50,
    ("select", "n"): "auto",
}
# Keys no stage flag carries, and who reads them instead.
NOT_FLAGGED = {
    ("review", "mode"): 'M.review["mode"]',  # the workflow: simulated reviewers or a person
    ("review", "decisions"): 'M.review["decisions"]',  # the workflow: where the decisions are
    ("download", "sources"): "--sources-json",  # mining download --source / --sources-json
    ("dask", "scheduler"): "--scheduler",  # mining download/describe --scheduler
    ("dask", "slurm"): "--slurm",
    ("release", "licenses"): "--licenses",  # mining release --licenses: names and URLs too, not only codes
    ("cascade", "methods"): "M.cascaded",  # the workflow: which describe jobs take the shortlist
    ("cascade", "by"): "M.shortlisted_by",  # the workflow: whose stores make it
}


def other_value(section: str, key: str) -> object:
    if (section, key) in OTHER:
        return OTHER[section, key]
    sub = SCHEMA["properties"][section]["properties"][key]
    default = sub["default"]
    if "enum" in sub:
        return next(v for v in sub["enum"] if v != default)
    if sub.get("type") == "boolean":
        return not default
    if sub.get("type") == "integer":
        return default + 1
    if sub.get("type") == "number":
        top = sub.get("maximum", sub.get("exclusiveMaximum"))
        return (default + top) / 2 if top is not None else default + 1.5
    raise AssertionError(f"add a value for {section}.{key} to OTHER")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser, by its words (`select`, `demo build`)."""
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sp in action.choices.items():
                inner = _subparsers(sp)
                out.update({f"{name} {k}": v for k, v in inner.items()} if inner else {name: sp})
    return out


PARSERS = _subparsers(build_parser())


def flagged() -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(section, key) -> [(command, flag)] of every generated settings flag."""
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for command, sp in PARSERS.items():
        for dest, value in sp._defaults.items():
            if dest.startswith("flags_"):
                for key, flag in value.items():
                    found.setdefault((dest.removeprefix("flags_"), key), []).append((command, flag))
    return found


def _action(sp: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in sp._actions if flag in a.option_strings)


def _required(sp: argparse.ArgumentParser) -> list[str]:
    argv: list[str] = []
    for a in sp._actions:
        if a.required and a.option_strings:
            argv += [a.option_strings[0], str(a.choices[0]) if a.choices else "x"]
        elif not a.option_strings and a.nargs is None:
            argv.append("x")
    return argv


def _flag_words(sp: argparse.ArgumentParser, flag: str, value: object) -> list[str]:
    action = _action(sp, flag)
    if isinstance(action, argparse.BooleanOptionalAction):
        return [flag if value else "--no-" + flag[2:]]
    items = value if action.nargs in ("+", "*") else [value]
    return [flag, *(json.dumps(v) if not isinstance(v, str) else v for v in items)]


def test_each_section_has_one_options_type_key_for_key_the_schema():
    assert sorted(options.SECTIONS) == OBJECT_SECTIONS
    for name, cls in options.SECTIONS.items():
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, name
        assert [f.name for f in dataclasses.fields(cls)] == list(SCHEMA["properties"][name]["properties"]), name
        # no default in the options type: the schema's is the only one
        assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                   for f in dataclasses.fields(cls)), name


@pytest.mark.parametrize("section, key", KEYS, ids=[f"{s}.{k}" for s, k in KEYS])
def test_every_default_is_the_schemas_in_the_cli_help_the_parser_and_the_options(section, key, tmp_path):
    sub = SCHEMA["properties"][section]["properties"][key]
    default = sub.get("default")
    assert getattr(options.defaults(section), key) == default
    where = flagged().get((section, key), [])
    if not where:  # carried another way: a stage flag of its own, or the workflow reads it
        assert (section, key) in NOT_FLAGGED, f"{section}.{key}: no stage takes it (no flag, not read by the workflow)"
        how = NOT_FLAGGED[section, key]
        if how.startswith("--"):
            assert any(how in sp._option_string_actions for sp in PARSERS.values()), how
        else:
            assert how in "".join(p.read_text() for p in (REPO / "workflows" / "rules").glob("*.smk")), how
        return
    other = other_value(section, key)
    assert other != default
    companions = {"cluster": {"scheduler": OTHER["dask", "scheduler"]}} if section == "dask" else {}
    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump({section: {key: other, **companions.get(key, {})}}))
    for command, flag in where:
        sp = PARSERS[command]
        # --help shows the schema's default (a list or null as JSON, text as it is)
        shown = default if isinstance(default, str) else json.dumps(default)
        assert f"default {shown};" in _action(sp, flag).help.replace("%%", "%"), (command, flag)
        base = _required(sp)
        # nothing given: the schema's default
        assert getattr(options.from_args(sp.parse_args(base), section), key) == default, (command, flag)
        # the manifest's value
        assert getattr(options.from_args(sp.parse_args(base + ["--manifest", str(m)]), section), key) == other
        # a flag over the manifest: the flag's (here the default again, given explicitly)
        if default is not None:
            args = sp.parse_args(base + ["--manifest", str(m), *_flag_words(sp, flag, default)])
            assert getattr(options.from_args(args, section), key) == default, (command, flag)


def flag_offences(parsers: dict[str, argparse.ArgumentParser]) -> list[str]:
    """Every settings flag of every verb named by the one rule, and every option spelt once.

    A flag setting key K of section S on verb V is `--K` when S is V's own section and
    `--S-K` otherwise (underscores as hyphens); an own key is `--S-K` only where `--K` is
    another option of V's (an input file's). Its help names the manifest key `S.K`. No option
    has a second spelling: a settings flag has one option string (a boolean its `--no-`
    form too), and no other option writes the same setting."""
    offences = []
    for command, sp in parsers.items():
        verb = command.split()[0]
        by_dest = {}
        for a in sp._actions:
            by_dest.setdefault(a.dest, []).append(a)
        for dest_name, value in sp._defaults.items():
            if not dest_name.startswith("flags_"):
                continue
            section = dest_name.removeprefix("flags_")
            for key, flag in value.items():
                plain, qualified = "--" + key.replace("_", "-"), f"--{section}-{key.replace('_', '-')}"
                actions = by_dest.get(options.dest(section, key), [])
                if len(actions) != 1:
                    offences.append(f"{command}: {section}.{key} is set by {len(actions)} options "
                                    f"({', '.join('/'.join(a.option_strings) for a in actions)}): one spelling each")
                    continue
                action = actions[0]
                boolean = isinstance(action, argparse.BooleanOptionalAction)
                spellings = [flag, "--no-" + flag[2:]] if boolean else [flag]
                if action.option_strings != spellings:
                    offences.append(f"{command}: {section}.{key} is spelt {' '.join(action.option_strings)} "
                                    f"(one spelling: {flag})")
                if section != verb and flag != qualified:
                    offences.append(f"{command}: {section}.{key} is {flag}: another section's key is {qualified}")
                elif section == verb and flag != plain and not (flag == qualified
                                                                and plain in sp._option_string_actions):
                    offences.append(f"{command}: {section}.{key} is {flag}: the verb's own key is {plain} "
                                    f"({qualified} only where {plain} is another option)")
                if f"manifest {section}.{key})" not in (action.help or ""):
                    offences.append(f"{command}: {flag}'s help does not name the manifest key {section}.{key}")
    return offences


def test_every_settings_flag_is_its_manifest_key_spelt_once():
    assert flag_offences(PARSERS) == []
    # describe's method settings are --param KEY=VALUE, KEY the manifest's: no flag of their own
    from mining.methods import method_class, method_names

    keys = {k for m in method_names() for k in method_class(m).defaults}
    named = sorted(o for o in PARSERS["describe"]._option_string_actions
                   if o.removeprefix("--no-").removeprefix("--").replace("-", "_") in keys
                   and o != "--model")  # --model STORE: the candidates store reused, not onnx-global's model file
    assert named == [], f"describe: method settings with a flag of their own (use --param KEY=VALUE): {named}"


def test_the_flag_check_sees_an_offence():
    def parser(verb: str) -> argparse.ArgumentParser:
        return argparse.ArgumentParser(prog=f"mining {verb}")

    clean = parser("select")
    clean.add_argument("--near-duplicates", type=Path)  # an input file's flag
    options.add_flags(clean, "select", keys=["n", "near_duplicates", "drop_unclear"])
    options.add_flags(clean, "evaluate", keys=["setups"])
    assert flag_offences({"select": clean}) == []
    assert clean._defaults["flags_select"]["near_duplicates"] == "--select-near-duplicates"
    assert clean._defaults["flags_evaluate"] == {"setups": "--evaluate-setups"}

    renamed = parser("select")  # a key under a name of its own
    options.add_flags(renamed, "select", keys=["auto_tolerance"])
    renamed._defaults["flags_select"]["auto_tolerance"] = "--tolerance"
    alias = parser("select")  # a second spelling of a setting
    options.add_flags(alias, "select", keys=["leak_risk"])
    alias.add_argument("--allow-unreviewed-risk", dest=options.dest("select", "leak_risk"), action="store_const",
                       const="allow")
    foreign = parser("release")  # another section's key without its section
    foreign.add_argument("--over-target", dest=options.dest("audit", "over_target"),
                         help="(manifest audit.over_target)")
    foreign.set_defaults(flags_audit={"over_target": "--over-target"})
    twice = parser("score")  # two option strings for one setting
    twice.add_argument("--review-top", "--top", dest=options.dest("score", "review_top"),
                       help="(manifest score.review_top)")
    twice.set_defaults(flags_score={"review_top": "--review-top"})
    assert flag_offences({"select": renamed, "select2": alias, "release": foreign, "score": twice}) == [
        "select: select.auto_tolerance is spelt --auto-tolerance (one spelling: --tolerance)",
        "select: select.auto_tolerance is --tolerance: the verb's own key is --auto-tolerance "
        "(--select-auto-tolerance only where --auto-tolerance is another option)",
        "select2: select.leak_risk is set by 2 options (--leak-risk, --allow-unreviewed-risk): "
        "one spelling each",
        "release: audit.over_target is --over-target: another section's key is --audit-over-target",
        "score: score.review_top is spelt --review-top --top (one spelling: --review-top)"]


def test_a_flag_out_of_the_schemas_range_is_one_line_naming_the_flag():
    sp = PARSERS["select"]
    args = sp.parse_args(_required(sp) + ["--n", "lots"])
    with pytest.raises(Exception) as err:
        options.from_args(args, "select")
    assert str(err.value) == "--n must be a positive integer or auto"


def test_a_flag_value_that_is_not_yaml_is_argparses_one_line_naming_the_flag(capsys):
    from mining.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["select", "--n", "[oops"])
    assert exit_.value.code == 2
    assert "argument --n: '[oops' is not a YAML value" in capsys.readouterr().err


GEO = json.loads((REPO / "mining" / "schemas" / "geofilter.schema.json").read_text())


def _leaves(node: dict, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    out = [(path, node["default"])] if "default" in node and path else []
    for k, v in node.get("properties", {}).items():
        out += _leaves(v, path + (k,))
    return out


@pytest.mark.parametrize("path, default", _leaves(GEO), ids=[".".join(p) for p, _ in _leaves(GEO)])
def test_every_geofilter_default_is_what_its_recipe_takes(path, default):
    """geofilter reads its section (`--manifest`) into its typed recipe, mining.settings.exclusion.Recipe."""
    section: dict = {"countries": [{"code": "GBR", "include_dependencies": False}]}
    if path[0] == "sample":
        section["sample"] = {"n": 10}
    sch = {"$defs": SCHEMA.get("$defs", {}), **SCHEMA["properties"]["geofilter"]}
    manifest.check(section, sch, Locator("t"), ("geofilter",))
    recipe = parse_section(section, Locator("t"), read_geojson=load_geojson, base_dir=REPO, known_codes=lambda c: True)
    assert getattr(recipe, "_".join(path)) == default
