"""The manifest's JSON schema (`mining/schemas/`): one definition of every manifest key, its
type and its default, read by the manifest loader and by whatever needs one of its rules."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def schema() -> dict[str, Any]:
    """The whole-manifest schema, with the geofilter section's own schema inserted."""
    base = resources.files("mining.schemas")
    full = json.loads((base / "manifest.schema.json").read_text())
    geo = base / "geofilter.schema.json"
    if geo.is_file():
        section = json.loads(geo.read_text())
        # embedded without its own $schema/$id, which would make jsonschema validate it with
        # a plain validator of that dialect (one that does not fill defaults)
        section.pop("$schema", None)
        section.pop("$id", None)
        full["properties"]["geofilter"] = section
    return full
