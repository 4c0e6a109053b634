"""`mining geofilter`: which YFCC100M rows become download candidates.

`mining.exclusion` (shared) validates the recipe, `countries` and `areas` build the exclusion regions,
`regions` tests points fast, `filter` streams the metadata and writes the funnel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mining.exclusion import SECTION, Recipe, is_known_code, parse_section
from mining.stages.geofilter.filter import geofilter
from mining.geoshapes import load_geojson
from mining.manifest import load_section


def load_recipe(path: str | Path, known_codes: Any = None) -> Recipe:
    """Read a manifest file and validate its `geofilter:` section (other top-level keys are
    other stages' business and are ignored)."""
    section, where = load_section(path, SECTION)
    return parse_section(section, where, read_geojson=load_geojson, base_dir=Path(path).parent,
                         known_codes=known_codes)


def load(manifest: str | Path) -> Recipe:
    """Load and fully validate a manifest's geofilter section (country codes included)."""
    return load_recipe(manifest, known_codes=is_known_code)


def run(metadata: str | Path, manifest: str | Path, out: str | Path, progress: bool = True) -> dict:
    """Validate the manifest, then filter `metadata` into `out`; returns the stats dict."""
    recipe = load(manifest)
    return geofilter(metadata, recipe, out, progress=progress)


__all__ = ["Recipe", "load", "load_recipe", "run"]
