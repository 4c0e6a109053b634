"""Each stage's settings: one frozen options type per manifest section, whose defaults live
only in the schema (`mining/schemas/manifest.schema.json`).

A setting is written in three places at most: the schema (its type, range, default and
words), the section's options type below (its name and Python type, no default), and the
stage code that uses it. The CLI's flags are generated from the schema (`add_flags`: one
flag per key, named by one rule, `--help` shows the schema's default and the manifest key), every stage that has a section takes
`--manifest FILE` (its section, the schema's defaults for what the section leaves out) plus
explicit flags that override it (`from_args`), and the workflow's rules pass the manifest,
never a setting. tests/unit/settings/test_options.py walks every schema key.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mining.settings import manifest
from mining.errors import UserError
from mining.files.yamlfile import Locator, flag_value


@dataclass(frozen=True)
class DemoOptions:
    preset: Literal["micro", "tiny", "small", "medium", "city100"]
    seed: int
    benchmarks: int
    port: int
    faults: dict[str, float]


@dataclass(frozen=True)
class DownloadOptions:
    host: str
    size: Literal["b", "o"]
    per_host_rps: float
    threads: int
    shard_size: int
    min_size: int
    timeout: float
    connect_timeout: float
    retries: int
    max_throttle_wait: float
    tar: bool
    min_ok_fraction: float
    sources: list[dict[str, Any]] | None  # supersedes host/size (mining.stages.download.sources)


@dataclass(frozen=True)
class DaskOptions:
    cluster: Literal["local", "scheduler", "slurm"]
    scheduler: str | None  # with cluster: scheduler
    slurm: str | None  # with cluster: slurm


@dataclass(frozen=True)
class DescribeOptions:
    shard_size: int
    params: dict[str, dict[str, Any]]  # method name -> its settings (keys it declares)


@dataclass(frozen=True)
class CascadeOptions:
    methods: list[str]  # described only for the shortlist (docs/cascade.md)
    by: list[str]  # the cheaper methods whose rankings make it ([]: every other mining method)
    shortlist: int  # per `by` method and landmark
    check: int  # random candidates off the shortlist described too: what it missed, measured
    max_missed: float
    confidence: float
    seed: int


@dataclass(frozen=True)
class NeardupOptions:
    max_hash_distance: int
    min_cosine: float
    landmark_max_hash_distance: int
    landmark_min_cosine: float


@dataclass(frozen=True)
class ScoreOptions:
    review_top: int
    late_since: Literal["refuse", "allow"]  # a landmark's since later than every candidate (mining/evidence/since.py)


@dataclass(frozen=True)
class ReviewOptions:
    mode: Literal["human", "simulate"]
    reviewers: int
    decisions: str | None
    budget: int | None  # total review items over all landmarks (mining.stages.score.budget); None: review_top each
    min_per_landmark: int


@dataclass(frozen=True)
class SelectOptions:
    n: int | Literal["auto"]
    auto_tolerance: float
    drop_unclear: bool
    near_duplicates: Literal["one_per_group", "keep"]
    leak_risk: Literal["refuse", "allow"]
    require_full_res: bool
    partial_review: Literal["refuse", "allow"]


@dataclass(frozen=True)
class AuditOptions:
    max_leak_rate: float
    confidence: float
    seed: int
    over_target: Literal["refuse", "allow"]


@dataclass(frozen=True)
class EvaluateOptions:
    n: int | None
    random_seeds: list[int]
    setups: list[Literal["easy", "medium", "hard"]]
    aqe_n: int  # αQE's neighbours (0: off; mining.stages.evaluate.expansion)
    aqe_alpha: float
    dba_n: int  # DBA's neighbours (0: off)
    dba_alpha: float
    held_out: list[str]  # evaluated, never scored or mined (docs/protocols.md "Held-out methods")


LicenceCode = Literal["by", "by-sa", "by-nd", "by-nc", "by-nc-sa", "by-nc-nd", "cc0", "pdm", "nkcr", "us-gov"]


@dataclass(frozen=True)
class ReleaseOptions:
    licenses: Literal["commercial", "all"] | list[LicenceCode]
    blur_faces: bool
    face_threshold: float
    min_face_px: int
    tar: bool
    kit: bool
    shard_size: int


# manifest section -> its options type (every object section of the schema but geofilter,
# whose typed recipe is mining.settings.exclusion.Recipe)
SECTIONS: dict[str, type] = {
    "demo": DemoOptions, "download": DownloadOptions, "dask": DaskOptions, "describe": DescribeOptions,
    "cascade": CascadeOptions, "neardup": NeardupOptions,
    "score": ScoreOptions, "review": ReviewOptions, "select": SelectOptions, "audit": AuditOptions,
    "evaluate": EvaluateOptions,
    "release": ReleaseOptions,
}


def section_schema(name: str) -> dict[str, Any]:
    """A section's schema, with the `$defs` its `$ref`s point at."""
    full = manifest.schema()
    return {"$defs": full.get("$defs", {}), **full["properties"][name]}


def build(name: str, section: dict[str, Any], where: Locator | None = None) -> Any:
    """The options of a section (a copy validated, the schema's defaults filled in)."""
    data = json.loads(json.dumps(section))
    manifest.check(data, section_schema(name), where or Locator("command line", what="settings"), (name,))
    if name == "describe":  # each method's settings, by describe's own rule (as a manifest's are)
        manifest.check_settings(data["params"], where or Locator("command line", what="settings"))
    cls = SECTIONS[name]
    return cls(**{f.name: data.get(f.name) for f in dataclasses.fields(cls)})


def defaults(name: str) -> Any:
    """The options of an empty section: every value the schema's default."""
    return build(name, {})


def of(m: manifest.Manifest, name: str) -> Any:
    """The options of a loaded manifest's section."""
    return build(name, m[name], m.where)


def _value(text: str) -> Any:
    """A flag's value read as YAML (`--n=auto`, `--n=2000`): the schema then checks it."""
    try:
        return flag_value(text, repr(text))
    except UserError as exc:  # argparse's own error line then names the flag
        raise argparse.ArgumentTypeError(str(exc)) from None


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return str(text).replace("%", "%%")


def dest(name: str, key: str) -> str:
    """Where a settings flag's value goes in the parsed arguments (None: not given)."""
    return f"set_{name}_{key}"


def verb_of(p: argparse.ArgumentParser) -> str | None:
    """The verb a parser is for (`mining select` → select, `mining review simulate` → review)."""
    words = p.prog.split()
    return words[1] if len(words) > 1 else None


def flag_of(verb: str | None, name: str, key: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """The flag of key `key` of section `name` on verb `verb`'s parser, one rule for every verb
    (underscores become hyphens): a key of the verb's own section is `--key`; a key of another
    section the verb reads is `--<section>-<key>` (score's review.budget: `--review-budget`;
    release's audit.over_target: `--audit-over-target`); an own key whose `--key` is an input
    file's flag of the verb (`taken`: select's `--near-duplicates NEARDUP.parquet`) is
    `--<section>-<key>` too (`--select-near-duplicates`), so that a file keeps the flag it has
    on every verb and the setting is spelled as its manifest path."""
    plain = "--" + key.replace("_", "-")
    return plain if name == verb and plain not in taken else f"--{name}-{key.replace('_', '-')}"


def add_flags(p: argparse.ArgumentParser, name: str, keys: list[str] | None = None,
              manifest_help: str | None = None) -> None:
    """`--manifest FILE` and one flag per key of section `name` (all of them, or `keys`), each
    with the schema's words and default in its help; read them back with `from_args`. Each
    flag is named by `flag_of`'s rule (one spelling per setting: no alias, no name of a verb's
    own); its help ends with the manifest key it sets. Booleans get `--key/--no-key`; lists
    take several values; other values are read as YAML."""
    if not any("--manifest" in a.option_strings for a in p._actions):
        p.add_argument("--manifest", type=Path, metavar="FILE",
                       help=manifest_help or f"a run manifest: its {name}: section gives the settings below "
                       "(the schema's defaults for what it leaves out; a flag given here wins)")
    sch = section_schema(name)
    named = dict(p.get_default(f"flags_{name}") or {})
    verb = verb_of(p)
    group = p.add_argument_group(f"settings (manifest section {name}:; defaults are the schema's)")
    for key in keys if keys is not None else list(sch["properties"]):
        sub = sch["properties"][key]
        words = sub.get("description", "").replace("%", "%%")
        default = f"default {_shown(sub['default'])}; " if "default" in sub else ""
        kw: dict[str, Any] = {"dest": dest(name, key), "default": None,
                              "help": f"{words} ({default}manifest {name}.{key})".strip()}
        kind = sub.get("type")
        if kind == "boolean":
            kw["action"] = argparse.BooleanOptionalAction
        elif kind == "integer":
            kw["type"], kw["metavar"] = int, "N"
        elif kind == "number":
            kw["type"], kw["metavar"] = float, "X"
        elif "enum" in sub:
            kw["choices"] = sub["enum"]
        elif kind == "string":
            kw["metavar"] = "TEXT"
        elif kind == "array":
            # a list that may be empty takes none (`--held-out` alone: the empty list over the manifest's)
            kw.update(nargs="*" if not sub.get("minItems") and sub.get("default") == [] else "+", action="extend",
                      type=_value, metavar="VALUE")
        else:
            kw.update(type=_value, metavar="VALUE")
        named[key] = flag_of(verb, name, key, set(p._option_string_actions))
        group.add_argument(named[key], **kw)
    p.set_defaults(**{f"flags_{name}": named})


class _Flags(Locator):
    """Errors about settings given as flags name the flag (`--n must be ...`)."""

    def __init__(self, named: dict[str, str]):
        super().__init__("command line", what="settings")
        self.named = named

    def error(self, path: Any, message: str) -> UserError:
        flag = self.named.get(str(path[1])) if len(path) > 1 else None
        return UserError(f"{flag} {message}") if flag else super().error(path, message)


def given(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """The settings of section `name` given as flags (not left at their default)."""
    keys = section_schema(name)["properties"]
    return {k: getattr(args, dest(name, k)) for k in keys if getattr(args, dest(name, k), None) is not None}


def manifest_section(path: Path | None, name: str) -> tuple[dict[str, Any], Locator | None]:
    """A manifest file's section `name` (empty when the file or the section is absent)."""
    if path is None:
        return {}, None
    return manifest.load_section(path, name, required=False)


def from_args(args: argparse.Namespace, name: str, section: dict[str, Any] | None = None) -> Any:
    """The options of a command line: `--manifest`'s section (or `section`), the flags given on
    top, the schema's defaults for the rest, all checked against the schema."""
    base, where = (section, None) if section is not None else manifest_section(getattr(args, "manifest", None), name)
    flags = given(args, name)
    if flags:  # the flags' values first, so that an error names the flag
        build(name, {**base, **flags}, _Flags({k: v for k, v in getattr(args, f"flags_{name}").items() if k in flags}))
    return build(name, {**base, **flags}, where)
