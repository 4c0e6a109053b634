"""`mining geofilter`: which YFCC100M rows become download candidates.

`mining.exclusion` (shared) validates the recipe, `countries` and `areas` build the exclusion regions,
`regions` tests points fast, `filter` streams the metadata and writes the funnel.
"""

from __future__ import annotations

from pathlib import Path

from mining.exclusion import Recipe, load_recipe


def load(manifest: str | Path) -> Recipe:
    """Load and fully validate a manifest's geofilter section (country codes included)."""
    from mining.exclusion import is_known_code

    return load_recipe(manifest, known_codes=is_known_code)


def run(metadata: str | Path, manifest: str | Path, out: str | Path, progress: bool = True) -> dict:
    """Validate the manifest, then filter `metadata` into `out`; returns the stats dict."""
    from mining.stages.geofilter.filter import geofilter

    recipe = load(manifest)
    return geofilter(metadata, recipe, out, progress=progress)


__all__ = ["Recipe", "load", "load_recipe", "run"]
