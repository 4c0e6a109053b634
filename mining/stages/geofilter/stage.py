"""`mining geofilter`: the metadata → candidates.parquet + stats.json, by the manifest's
`geofilter:` section (its options type is `mining.settings.exclusion.Recipe`, the parsed section)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mining.files.atomic import output_folder
from mining.settings.exclusion import SECTION, Recipe, is_known_code, parse_section
from mining.settings.geoshapes import load_geojson
from mining.settings.manifest import load_section
from mining.stages.geofilter.filter import metadata_files, write_candidates, writer_schema


def load_recipe(path: str | Path, known_codes: Any = None) -> Recipe:
    """Read a manifest file and validate its `geofilter:` section (other top-level keys are
    other stages' business and are ignored)."""
    section, where = load_section(path, SECTION)
    return parse_section(section, where, read_geojson=load_geojson, base_dir=Path(path).parent,
                         known_codes=known_codes)


def load(manifest: str | Path) -> Recipe:
    """Load and fully validate a manifest's geofilter section (country codes included)."""
    return load_recipe(manifest, known_codes=is_known_code)


def run(*, metadata: str | os.PathLike[str], out: str | os.PathLike[str], options: Recipe,
        progress: bool = True) -> dict:
    """Filter the metadata (`mining ingest`'s Parquet folder, or one Parquet file) with the
    recipe; write OUT/candidates.parquet and OUT/stats.json.

    One candidate per photo id (its first kept row), and none for a photo with any excluded
    row. Returns the stats dict (the funnel in photos): rows_in, photos_in, duplicate_ids
    {photos, rows, examples}, excluded {reason: photos} with all reasons present (zero when
    nothing was dropped for them, so funnels of different runs line up), photos_out and
    rows_out (the same number: rows in candidates.parquet)."""
    files = metadata_files(metadata)
    schema = writer_schema(files, options)
    with output_folder(out) as out_dir:  # a failed first run leaves nothing behind
        return write_candidates(files, schema, options, out_dir, progress)
