"""Run manifests (`manifests/*.yaml`): load, validate against the JSON schema, fill defaults.

Used by the Snakefile and by stages that read a manifest section, so that a bad manifest
fails the same way everywhere: before any data is read, with a message naming the key.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from mining.errors import UserError
from mining.yamlfile import Locator


def schema() -> dict[str, Any]:
    """The whole-manifest schema, with the geofilter section's own schema inserted."""
    base = resources.files("mining.schemas")
    full = json.loads((base / "manifest.schema.json").read_text())
    geo = base / "geofilter.schema.json"
    if geo.is_file():
        full["properties"]["geofilter"] = json.loads(geo.read_text())
    return full


def _fill_defaults(validator_class: type) -> type:
    """A validator that also writes schema defaults into the instance (jsonschema FAQ recipe)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: dict[str, Any], instance: Any, sch: Any) -> Any:
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "default" in sub and prop not in instance:
                    instance[prop] = json.loads(json.dumps(sub["default"]))
        yield from validate_properties(validator, properties, instance, sch)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def validate(data: Any, source: str = "manifest", lines: dict[Any, int] | None = None) -> dict[str, Any]:
    """Validate a manifest dict in place (filling defaults); raise UserError naming the key
    (and its line, when `lines` maps key paths to line numbers)."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: a manifest must be a YAML mapping")
    validator = _fill_defaults(jsonschema.Draft202012Validator)(schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        raise schema_error(Locator(source, lines), errors[0])
    check_methods(data["methods"], Locator(source, lines))
    return data


def check_methods(methods: list[str], where: Locator) -> None:
    """Every method is in the registry (built-ins and installed plug-ins), so that a typo
    fails now, not at describe after the download."""
    from mining.methods import method_names

    known = method_names()
    for i, name in enumerate(methods):
        if name not in known:
            raise where.error(("methods", i), f"unknown method {name!r} (known: {', '.join(known)})")


def schema_error(where: Locator, err: Any, prefix: tuple[str | int, ...] = ()) -> UserError:
    """One line for a jsonschema error: the key path (and line), and what was expected.

    A schema says what it expects in words with an `errorMessage` next to a `pattern` or
    `oneOf`; an unknown key lists the allowed ones; a `oneOf` without words reports its
    most relevant branch.
    """
    if err.validator in ("oneOf", "anyOf") and "errorMessage" not in err.schema and err.context:
        return schema_error(where, jsonschema.exceptions.best_match(err.context), prefix)
    path = prefix + tuple(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(str(k) for k in err.instance if k not in allowed)
        key = extra[0] if extra else "?"
        return where.error(path + (key,), f"unknown key {key!r} is not allowed (allowed: {', '.join(allowed)})")
    if err.validator in ("pattern", "oneOf") and "errorMessage" in err.schema:
        value = f"{err.instance!r}: " if err.validator == "pattern" else ""
        return where.error(path, value + err.schema["errorMessage"])
    return where.error(path, err.message)


def load(path: str | Path) -> dict[str, Any]:
    """Read and validate a whole manifest: the schema, then the geofilter section's own
    checks (country codes, coordinates, GeoJSON files), all before any data is read."""
    from mining import geofilter
    from mining.geofilter.manifest import read_manifest

    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: manifest not found")
    data, lines = read_manifest(p)
    validate(data, str(p), lines)
    geofilter.load(p)
    return data
