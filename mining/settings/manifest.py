"""Run manifests (`manifests/*.yaml`): load, validate against the JSON schema, fill defaults.

Used by the Snakefile and by stages that read a manifest section, so that a bad manifest
fails the same way everywhere: before any data is read, with a message naming the key.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, cast

import jsonschema

from mining.datasets.benchmarks import from_manifest
from mining.errors import UserError
from mining.settings.exclusion import is_known_code, parse_section
from mining.methods import method_class, method_names, shared_groups
from mining.methods.base import resolve
from mining.schemas.loader import schema
from mining.files.yamlfile import Locator, number_as_text, read_yaml


def _fill_defaults(validator_class: type) -> type:
    """A validator that also writes schema defaults into the instance (jsonschema FAQ recipe)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: dict[str, Any], instance: Any, sch: Any) -> Any:
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "default" in sub and prop not in instance:
                    instance[prop] = json.loads(json.dumps(sub["default"]))
        yield from validate_properties(validator, properties, instance, sch)

    # an integer setting is an integer: 50.0 is refused (the JSON Schema rule would take it, and a
    # float count then fails deep in a stage); booleans are not integers either. A number is finite:
    # NaN passes every bound (each comparison is false), so `.nan` would pass the schema
    strict = validator_class.TYPE_CHECKER.redefine_many({
        "integer": lambda _checker, value: isinstance(value, int) and not isinstance(value, bool),
        "number": lambda _checker, value: (isinstance(value, (int, float)) and not isinstance(value, bool)
                                           and math.isfinite(value))})
    return jsonschema.validators.extend(validator_class, {"properties": set_defaults}, type_checker=strict)


def validate(data: Any, source: str = "manifest", lines: dict[Any, int] | None = None) -> dict[str, Any]:
    """Validate a manifest dict in place (filling defaults); raise UserError naming the key
    (and its line, when `lines` maps key paths to line numbers)."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: a manifest must be a YAML mapping")
    check(data, schema(), Locator(source, lines))
    if "demo" not in data and "metadata" not in data:
        raise Locator(source, lines).error(("metadata",), "required: the yfcc100m_dataset file(s) to mine "
                                           "(only a demo run, with a demo: section, has none)")
    check_methods(data["methods"], Locator(source, lines))
    check_held_out(data["methods"], data["evaluate"]["held_out"], Locator(source, lines))
    check_method_params(data["methods"] + data["evaluate"]["held_out"], data["describe"]["params"], Locator(source, lines))
    check_cascade(data["methods"], data["evaluate"]["held_out"], data["cascade"], data["describe"]["params"],
                  Locator(source, lines))
    check_benchmarks(data["landmarks"], Locator(source, lines))
    check_several(data, Locator(source, lines))
    return data


def check_benchmarks(landmarks: Any, where: Locator) -> None:
    """Two benchmarks of a `landmarks:` list never share a name (given or the gnd file's)."""
    if isinstance(landmarks, list):
        try:
            from_manifest(landmarks)
        except UserError as exc:
            raise where.error(("landmarks",), str(exc)) from None


def check_several(data: dict[str, Any], where: Locator) -> None:
    """Settings that one benchmark allows and several do not: `select: {n: auto}` measures
    one benchmark's mAP-vs-N curve."""
    several = (isinstance(data["landmarks"], list) and len(data["landmarks"]) > 1) or (
        data["landmarks"] == "demo" and data.get("demo", {}).get("benchmarks", 1) > 1)
    if data.get("demo", {}).get("benchmarks", 1) > 1 and data["landmarks"] != "demo":
        raise where.error(("demo", "benchmarks"), "the demo world's cities are mined with `landmarks: demo`")
    if several and data["select"]["n"] == "auto":
        raise where.error(("select", "n"), "n: auto measures one benchmark's curve; with several benchmarks give a number")


def check_method_params(methods: list[str], params: dict[str, dict[str, Any]], where: Locator) -> None:
    """`describe: {params: {METHOD: {KEY: VALUE}}}` names methods of the run, keys each one
    declares and values in each key's domain (`Method.domains`), so that a typo or a value
    out of range fails now, not after the download. (Only the methods given settings are
    imported, and the built-ins, for the settings they require: onnx-global's model.)"""
    for name in methods:
        target = resolve(name) or ""
        if target.startswith("mining.methods."):
            missing = method_class(name).missing(params.get(name))
            if missing:
                raise where.error(("describe", "params"), f"method {name!r} needs the setting(s) {', '.join(missing)} "
                                  f"(describe: {{params: {{{name}: {{{missing[0]}: ...}}}}}})")
    for name in params:
        if name not in methods:
            raise where.error(("describe", "params", name), f"settings for {name!r}, which is in neither methods nor "
                              f"evaluate: held_out ({', '.join(methods)})")
    check_settings(params, where)


def check_settings(params: dict[str, dict[str, Any]], where: Locator) -> None:
    """Each method's settings are keys it declares, with values in their domains (describe's own
    check, `Method.check_params`); one line naming describe.params.METHOD.KEY otherwise."""
    for name, settings in params.items():
        if resolve(name) is None:
            raise where.error(("describe", "params", name), f"settings for an unknown method {name!r} (known: "
                              f"{', '.join(method_names())}): params maps each method's name to its settings")
        cls = method_class(name)
        for key, value in settings.items():
            if key not in cls.defaults:
                raise where.error(("describe", "params", name, key),
                                  f"method {name!r} has no setting {key!r} (it has: {', '.join(sorted(cls.defaults))})")
            try:
                cls.check_params({key: value})
            except UserError as exc:
                raise where.error(("describe", "params", name, key), str(exc)) from None


def check_methods(methods: list[str], where: Locator) -> None:
    """Every method is in the registry (built-ins, their instance names such as
    onnx-global-NAME, installed plug-ins), so that a typo fails now, not at describe after the
    download."""
    known = method_names()
    for i, name in enumerate(methods):
        if resolve(name) is None:
            raise where.error(("methods", i), f"unknown method {name!r} (known: {', '.join(known)})")


def check_held_out(methods: list[str], held_out: list[str], where: Locator) -> None:
    """`evaluate: {held_out: [...]}` names known methods that do not mine (a method cannot both
    choose the set and be the witness that it is hard)."""
    for i, name in enumerate(held_out):
        if resolve(name) is None:
            raise where.error(("evaluate", "held_out", i), f"unknown method {name!r} (known: {', '.join(method_names())})")
        if name in methods:
            raise where.error(("evaluate", "held_out", i), f"{name!r} is in methods too: a held-out method never mines "
                              "(remove it from one of the two)")


def check_cascade(methods: list[str], held_out: list[str], cascade: dict[str, Any], params: dict[str, Any],
                  where: Locator) -> None:
    """`cascade:` names described methods to cascade and mining methods to shortlist by, never
    the same one in both, and never one half of a shared extraction (rsift-asmk and rsift-vlad
    are described in one pass: a shortlist for one would describe both)."""
    for i, name in enumerate(cascade["methods"]):
        if name not in methods + held_out:
            raise where.error(("cascade", "methods", i), f"{name!r} is described by no one: name a method of methods "
                              "or evaluate.held_out")
    for i, name in enumerate(cascade["by"]):
        if name not in methods or name in cascade["methods"]:
            raise where.error(("cascade", "by", i), f"{name!r}: the shortlist is made by mining methods that are not "
                              "cascaded themselves")
    if not cascade["methods"]:
        return  # no cascade: the groups below build every method (cnn-gem: its ONNX export, torch)
    if not by_methods(methods, cascade):
        raise where.error(("cascade", "by"), "no mining method is left to make the shortlist: keep at least one "
                          "method of methods out of cascade.methods")
    for group in shared_groups(methods + held_out, params):
        inside = [m for m in group if m in cascade["methods"]]
        if inside and len(inside) < len(group):
            raise where.error(("cascade", "methods"), f"{' and '.join(group)} share one feature extraction: cascade "
                              "all of them or none")


def by_methods(methods: list[str], cascade: dict[str, Any]) -> list[str]:
    """The methods whose rankings make the cascade's shortlist."""
    return list(cascade["by"]) or [m for m in methods if m not in cascade["methods"]]


def check(instance: Any, sch: dict[str, Any], where: Locator, prefix: tuple[str | int, ...] = ()) -> None:
    """Validate `instance` against `sch` in place, filling defaults; raise the first error
    (the shallowest key first) as one line naming the key and its line."""
    validator = _fill_defaults(jsonschema.Draft202012Validator)(sch)
    errors = sorted(validator.iter_errors(instance), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        raise schema_error(where, errors[0], prefix)


def schema_error(where: Locator, err: Any, prefix: tuple[str | int, ...] = ()) -> UserError:
    """One line for a jsonschema error: the key path (and line), and what was expected.

    A schema says what it expects in words with an `errorMessage` next to a `pattern` or
    `oneOf`; an unknown key lists the allowed ones; a `oneOf` without words reports the error
    of a branch whose type the value has (else that no branch takes it) and, when its branches
    are simple values, what they allow ("an integer >= 1, or null").
    """
    path = prefix + tuple(err.absolute_path)
    if err.validator in ("oneOf", "anyOf") and "errorMessage" not in err.schema and err.context:
        # the branches whose type the value has say what is wrong with it ("-1 is less than the
        # minimum of 1"), not the others ("-1 is not of type 'null'")
        near = [e for e in err.context if not (e.validator == "type" and not e.relative_path)]
        allowed = _allowed(err.schema[err.validator])
        if near:
            inner = jsonschema.exceptions.best_match(near)
            if allowed is None or inner.relative_path:
                return schema_error(where, inner, prefix)
            message = _message(inner)
        else:
            message = f"{err.instance!r} is not allowed"
        return where.error(path, message + (f" (allowed: {allowed})" if allowed else ""))
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(str(k) for k in err.instance if k not in allowed)
        key = extra[0] if extra else "?"
        return where.error(path + (key,), f"unknown key {key!r} is not allowed (allowed: {', '.join(allowed)})")
    if err.validator == "oneOf" and "errorMessage" in err.schema:
        return where.error(path, err.schema["errorMessage"])
    return where.error(path, _message(err))


def _message(err: Any) -> str:
    """A jsonschema error's words: a pattern's `errorMessage`, for a wrong type the type wanted
    and the value given."""
    if err.validator == "pattern" and "errorMessage" in err.schema:
        return f"{err.instance!r}: {err.schema['errorMessage']}"
    if err.validator == "type":
        kinds = [err.validator_value] if isinstance(err.validator_value, str) else list(err.validator_value)
        return f"must be {' or '.join(_KINDS.get(k, k) for k in kinds)}, got {err.instance!r}" + number_as_text(err.instance)
    return str(err.message)


_KINDS = {"integer": "an integer (a whole number, no decimal point)", "number": "a finite number", "string": "a text",
          "boolean": "true or false", "array": "a list", "object": "a mapping", "null": "null"}


def _allowed(branches: list[dict[str, Any]]) -> str | None:
    """The values a oneOf/anyOf of simple branches allows, in words ("an integer >= 1, or null");
    None when a branch is not simple (an object, a list)."""
    words = []
    for b in branches:
        if "$ref" in b:
            words.append("a " + b["$ref"].rsplit("/", 1)[-1].replace("_", " "))
        elif "enum" in b or "const" in b:
            words.append(" or ".join(map(repr, b.get("enum", [b.get("const")]))))
        elif b.get("type") in ("integer", "number", "string", "boolean", "null"):
            kind = {"integer": "an integer", "number": "a number"}.get(b["type"], _KINDS[b["type"]])
            bounds = [f"{op} {b[k]}" for k, op in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                                   ("maximum", "<="), ("exclusiveMaximum", "<")) if k in b]
            words.append(" ".join([kind, " and ".join(bounds)]).strip())
        else:
            return None
    return ", or ".join(words)


# The typed view of each stage's section is its options type (mining.settings.options: one frozen
# dataclass per section, built from it; tests/unit/settings/test_options.py keeps them key for key the schema's).


class Manifest(dict):
    """A validated manifest: the document with every schema default filled in, plus where it
    came from. Each stage takes its own section, typed: `m.download["host"]` (or, the same
    dict, `m["download"]["host"]`; `mining.settings.options.of(m, "download")` is the typed, frozen
    view); the geofilter section comes parsed into its typed recipe (`m.geofilter`, built from
    the same parse)."""

    def __init__(self, data: dict[str, Any], path: Path, lines: dict[Any, int]):
        super().__init__(data)
        self.path = path
        self.lines = lines
        self.geofilter: Any = None  # mining.settings.exclusion.Recipe, set by load()

    @property
    def where(self) -> Locator:
        return Locator(str(self.path), self.lines)

    @property
    def results(self) -> str:
        return cast(str, self["results"])

    @property
    def methods(self) -> list[str]:
        """The methods that mine (scored, they choose the set)."""
        return cast(list[str], self["methods"])

    @property
    def described(self) -> list[str]:
        """Every method described: those that mine, then the held-out ones (evaluated only)."""
        return self.methods + cast(list[str], self["evaluate"]["held_out"])

    @property
    def cascaded(self) -> list[str]:
        """The described methods described on the cascade's shortlist only (docs/cascade.md)."""
        return cast(list[str], self["cascade"]["methods"])

    @property
    def shortlisted_by(self) -> list[str]:
        """The mining methods whose rankings make the shortlist (with a cascade)."""
        return by_methods(self.methods, self["cascade"]) if self.cascaded else []

    def benchmarks(self, demo_gnds: Any = ()) -> list[Any]:
        """The run's benchmarks (`mining.datasets.benchmarks.Benchmark`, in manifest order); for
        `landmarks: demo`, the demo world's (name, gnd path) pairs `demo_gnds` (the layout's)."""
        return from_manifest(self["landmarks"], demo_gnds)

    @property
    def demo(self) -> dict[str, Any] | None:
        """The demo world's settings; None for a run on real data."""
        return cast(dict[str, Any] | None, self.get("demo"))

    @property
    def download(self) -> dict[str, Any]:
        return cast(dict[str, Any], self["download"])

    @property
    def describe(self) -> dict[str, Any]:
        return cast(dict[str, Any], self["describe"])

    @property
    def review(self) -> dict[str, Any]:
        return cast(dict[str, Any], self["review"])

    @property
    def select(self) -> dict[str, Any]:
        return cast(dict[str, Any], self["select"])

    @property
    def release(self) -> dict[str, Any]:
        return cast(dict[str, Any], self["release"])


def _read(path: str | Path) -> tuple[Path, Any, dict[Any, int]]:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"cannot read manifest {p}: not found")
    data, lines = read_yaml(p, "manifest")
    return p, data, lines


def load(path: str | Path, inputs: bool = False) -> Manifest:
    """Read a manifest once and validate all of it before any data is read: the schema (with
    its defaults), the methods against the registry, and the geofilter section's own checks
    (country codes, coordinates, GeoJSON files, parsed). `inputs` (the workflow, before it
    plans anything): every input file the manifest names is also checked readable now
    (`check_inputs`), so that a typo fails in one line before ingest, not at the stage that
    reads the file."""
    from mining.settings.geoshapes import load_geojson  # shapely: only when a manifest is loaded

    p, data, lines = _read(path)
    m = Manifest(validate(data, str(p), lines), p, lines)
    m.geofilter = parse_section(m["geofilter"], m.where, read_geojson=load_geojson, base_dir=p.parent,
                                known_codes=is_known_code)
    if inputs:
        check_inputs(m)
    return m


def _input_files(m: Manifest) -> list[tuple[tuple[str | int, ...], str, str]]:
    """(key path, path, "file" or "folder") of every input the manifest names (paths relative to
    the working directory, as the workflow's rules use them)."""
    out: list[tuple[tuple[str | int, ...], str, str]] = []
    if "demo" not in m:
        out += [(("metadata", i), f, "file") for i, f in enumerate(m["metadata"])]
        if m.get("hashes"):
            out.append((("hashes",), m["hashes"], "file"))
        lm = m["landmarks"]
        if isinstance(lm, list):
            out += [(("landmarks", i, "gnd"), b["gnd"], "file") for i, b in enumerate(lm)]
        elif lm != "demo":
            out.append((("landmarks",), lm, "file"))
    if m.get("places"):
        out.append((("places",), m["places"], "file"))
    for i, src in enumerate(m.download.get("sources") or []):
        if src.get("kind") == "local" and src.get("path"):
            out.append((("download", "sources", i, "path"), str(Path(src["path"]).expanduser()), "folder"))
    for name, settings in m.describe["params"].items():  # a method's model file
        out += [(("describe", "params", name, key), settings[key], "file") for key in method_class(name).files
                if settings.get(key) is not None]
    return out


def check_inputs(m: Manifest) -> None:
    """Every input file (folder) the manifest names exists and can be read: one line naming the
    key and its line otherwise."""
    for key, name, kind in _input_files(m):
        p = Path(name)
        if not p.exists():
            raise m.where.error(key, f"{kind} not found: {p}")
        if kind == "folder":
            if not p.is_dir():
                raise m.where.error(key, f"not a folder: {p}")
            if not os.access(p, os.R_OK | os.X_OK):
                raise m.where.error(key, f"folder not readable: {p}")
            continue
        if not p.is_file():
            raise m.where.error(key, f"not a file: {p}")
        try:
            with open(p, "rb") as f:
                f.read(1)
        except OSError as exc:
            raise m.where.error(key, f"cannot read {p}: {exc.strerror or exc}") from None


def load_section(path: str | Path, name: str, required: bool = True) -> tuple[dict[str, Any], Locator]:
    """One section of a manifest file, validated against its schema with defaults filled, for
    a stage run on its own (`mining STAGE --manifest`): the other sections are other stages'
    business and are not checked. `required=False`: a manifest without the section is all
    defaults."""
    p, data, lines = _read(path)
    if not isinstance(data, dict):
        raise UserError(f"manifest {p}: expected a mapping with a {name}: section")
    if name not in data and required:
        raise UserError(f"manifest {p}: no {name}: section")
    section = {} if data.get(name) is None else data[name]
    where = Locator(str(p), lines)
    full = schema()
    check(section, {"$defs": full.get("$defs", {}), **full["properties"][name]}, where, (name,))
    return section, where
