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
import yaml

from mining.errors import UserError


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


def _key_path(error: jsonschema.ValidationError) -> str:
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties":
        return path + (" " if path else "") + "(unknown key)"
    if error.validator == "required":
        return path or "(top level)"
    return path or "(top level)"


def validate(data: Any, source: str = "manifest") -> dict[str, Any]:
    """Validate a manifest dict in place (filling defaults); raise UserError naming the key."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: a manifest must be a YAML mapping")
    validator = _fill_defaults(jsonschema.Draft202012Validator)(schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        raise UserError(f"{source}: invalid key {_key_path(e)}: {e.message}")
    return data


def load(path: str | Path) -> dict[str, Any]:
    """Read and validate a manifest file."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: manifest not found")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"{p}: not valid YAML ({str(exc).splitlines()[0]})") from None
    return validate(data, str(p))
