"""The exclusion recipe: a run manifest's `geofilter:` section, validated and typed.

Shared (the manifest loader validates it with every other section; the geofilter stage
builds its regions from it), so it lives outside the stage. Everything here runs before any
metadata is read, so a typo costs seconds, not an hour of filtering. Errors name the
manifest file, line and key path (e.g. `geofilter.areas[0].center`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import pyarrow.parquet as pq

from mining.errors import UserError
from mining.files.yamlfile import Locator

SECTION = "geofilter"
COUNTRIES_FILE = "data/ne_10m_admin0.parquet"  # Natural Earth 1:10m admin-0, shipped


@lru_cache(maxsize=1)
def _country_codes() -> frozenset[str]:
    """The codes a manifest may name: every entry's ADM0_A3 and ISO_A3_EH (only these two
    columns are read; the polygons are the geofilter stage's business)."""
    with resources.files("mining").joinpath(COUNTRIES_FILE).open("rb") as fh:
        # ParquetFile: read_table would import pyarrow.dataset (and pandas), ~0.3 s a run
        t = pq.ParquetFile(fh).read(columns=["ADM0_A3", "ISO_A3_EH"]).to_pydict()
    return frozenset(t["ADM0_A3"]) | frozenset(t["ISO_A3_EH"])


def is_known_code(code: str) -> bool:
    """Whether a manifest country code names a Natural Earth entry (ADM0_A3 or ISO_A3_EH)."""
    return code.upper() in _country_codes()


@dataclass(frozen=True)
class CountryRule:
    code: str
    include_dependencies: bool


@dataclass(frozen=True)
class CircleArea:
    name: str
    lat: float
    lon: float
    radius_km: float


@dataclass(frozen=True)
class BBoxArea:
    name: str
    min_lon: float
    min_lat: float
    max_lon: float
    max_lat: float


@dataclass(frozen=True)
class GeoJSONArea:
    name: str
    path: Path


Area = CircleArea | BBoxArea | GeoJSONArea


@dataclass(frozen=True)
class Recipe:
    """A validated geofilter recipe (defaults come from the schema)."""

    countries: tuple[CountryRule, ...]
    areas: tuple[Area, ...]
    licenses: tuple[str, ...] | None
    photos_only: bool
    require_geotag: bool
    min_accuracy: int | None
    sample_n: int | None
    sample_seed: int
    shoreline_buffer_km: float
    source: str = field(default="<manifest>", compare=False)


# Coordinates --------------------------------------------------------------------------

_NUM = r"\d+(?:\.\d+)?"
_DMS = rf"{_NUM}\s*°\s*(?:{_NUM}\s*['′]\s*(?:{_NUM}\s*(?:\"|″|'')\s*)?)?"
_COMP = rf"(?:{_DMS}|{_NUM}\s*°?\s*)"
_HEMI_RE = re.compile(rf"^\s*(?P<lat>{_COMP})(?P<ns>[NSns])\s*,?\s*(?P<lon>{_COMP})(?P<ew>[EWew])\s*$")
_DEC_RE = re.compile(rf"^\s*(?P<lat>[-+]?{_NUM})\s*,\s*(?P<lon>[-+]?{_NUM})\s*$")
_PARTS_RE = re.compile(_NUM)


def _dms_ok(text: str, limit: float) -> bool:
    """Degrees within the limit, minutes and seconds below 60 (geopy would silently wrap)."""
    nums = [float(x) for x in _PARTS_RE.findall(text)]
    return nums[0] <= limit and all(x < 60 for x in nums[1:])


def parse_coordinate(value: Any) -> tuple[float, float]:
    """(lat, lon) from `[lat, lon]`, `"36.17, -115.14"` or `"36.17 N, 115.14 W"` (geopy parses).

    geopy's Point accepts much more, and some of it wrongly (space-separated DMS such as
    "36 10 12 N 115 8 24 W" becomes 8, -24; out-of-range longitudes wrap), so the string
    is first checked against the unambiguous forms; anything else is a ValueError.
    """
    from geopy.point import Point

    if isinstance(value, (list, tuple)):
        if len(value) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            raise ValueError("expected [latitude, longitude] as two numbers")
        lat, lon = float(value[0]), float(value[1])
    elif isinstance(value, str):
        hemi = _HEMI_RE.match(value)
        dec = _DEC_RE.match(value)
        if hemi:
            if not (_dms_ok(hemi["lat"], 90) and _dms_ok(hemi["lon"], 180)):
                raise ValueError(f"coordinate out of range: {value!r}")
        elif not dec:
            raise ValueError(
                f"cannot parse coordinate {value!r}: write latitude first, e.g. \"36.17 N, 115.14 W\", "
                "\"36°10'12\\\" N, 115°8'24\\\" W\" or \"36.17, -115.14\" (decimals need the comma; "
                "degrees-minutes-seconds need the ° ' \" marks)"
            )
        if dec:  # plain decimals: no parser needed (geopy would wrap out-of-range values)
            lat, lon = float(dec["lat"]), float(dec["lon"])
        else:
            try:
                lat, lon = tuple(Point(value))[:2]
            except ValueError as exc:
                raise ValueError(f"cannot parse coordinate {value!r}: {exc}") from None
    else:
        raise ValueError("expected [latitude, longitude] or a string such as \"36.17 N, 115.14 W\"")
    if not -90 <= lat <= 90:
        raise ValueError(f"latitude {lat} outside [-90, 90] (latitude comes first)")
    if not -180 <= lon <= 180:
        raise ValueError(f"longitude {lon} outside [-180, 180]")
    return lat, lon


# Validation ---------------------------------------------------------------------------


def parse_section(section: dict[str, Any], where: Locator, *, read_geojson: Callable[[Path], Any],
                  base_dir: Path | None = None, known_codes: Any = None) -> Recipe:
    """Build the Recipe from a `geofilter:` mapping already validated against its schema
    (defaults filled: `mining.settings.manifest`); check what a schema cannot, naming the key.

    `known_codes(code) -> bool` checks country codes (the Natural Earth table), so that an
    unknown code is rejected here, before any data is read; `read_geojson(path)`
    (`mining.settings.geoshapes.load_geojson`) reads a GeoJSON area now, not first at geofilter.
    """
    sample = section.get("sample")
    return Recipe(
        countries=_countries(section, where, known_codes),
        areas=_areas(section, where, read_geojson, base_dir),
        licenses=tuple(section["licenses"]) if "licenses" in section else None,
        photos_only=section["photos_only"],
        require_geotag=section["require_geotag"],
        min_accuracy=section.get("min_accuracy"),
        sample_n=sample["n"] if sample else None,
        sample_seed=sample["seed"] if sample else 0,
        shoreline_buffer_km=float(section["shoreline_buffer_km"]),
        source=where.source,
    )


def _countries(section: dict[str, Any], where: Locator, known_codes: Any) -> tuple[CountryRule, ...]:
    """The `countries:` rules: known codes (when `known_codes` can tell), each listed once."""
    countries = []
    seen: set[str] = set()
    for i, c in enumerate(section.get("countries", [])):
        code = c["code"].upper()
        if known_codes is not None and not known_codes(code):
            raise where.error((SECTION, "countries", i, "code"),
                              f"unknown country code {c['code']!r} (ISO 3166 alpha-3 as in Natural Earth ADM0_A3, e.g. GBR, FRA)")
        if code in seen:
            raise where.error((SECTION, "countries", i, "code"), f"country {code} is listed twice")
        seen.add(code)
        countries.append(CountryRule(code, bool(c["include_dependencies"])))
    return tuple(countries)


def _areas(section: dict[str, Any], where: Locator, read_geojson: Callable[[Path], Any],
           base_dir: Path | None) -> tuple[Area, ...]:
    """The `areas:` (a circle, a box or a GeoJSON file read now), each name used once."""
    areas: list[Area] = []
    names: set[str] = set()
    for i, a in enumerate(section.get("areas", [])):
        name = a["name"]
        if name in names:
            raise where.error((SECTION, "areas", i, "name"), f"area name {name!r} is used twice")
        names.add(name)
        if "center" in a:
            try:
                lat, lon = parse_coordinate(a["center"])
            except ValueError as exc:
                raise where.error((SECTION, "areas", i, "center"), str(exc)) from None
            areas.append(CircleArea(name, lat, lon, float(a["radius_km"])))
        elif "bbox" in a:
            x0, y0, x1, y1 = (float(v) for v in a["bbox"])
            if not (-180 <= x0 <= 180 and -180 <= x1 <= 180 and -90 <= y0 <= y1 <= 90):
                raise where.error((SECTION, "areas", i, "bbox"),
                                  "expected [min_lon, min_lat, max_lon, max_lat] in degrees, min_lat <= max_lat")
            areas.append(BBoxArea(name, x0, y0, x1, y1))
        else:
            p = Path(a["geojson"])
            if not p.is_absolute() and base_dir is not None:
                p = base_dir / p
            if not p.is_file():
                raise where.error((SECTION, "areas", i, "geojson"), f"GeoJSON file not found: {p}")
            try:  # read now, not first at geofilter (after the ingest)
                read_geojson(p)
            except UserError as exc:
                raise where.error((SECTION, "areas", i, "geojson"), str(exc)) from None
            areas.append(GeoJSONArea(name, p))
    return tuple(areas)
