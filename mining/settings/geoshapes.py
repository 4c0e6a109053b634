"""The exclusion recipe's shapes, shared: the shipped Natural Earth 1:10m admin-0 table (the
countries a manifest code names, with their dependencies) and the polygons of a GeoJSON area.
The geofilter stage tests points against them; the report draws them on its map."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import pyarrow.parquet as pq
import shapely
from shapely.geometry import shape

from mining.errors import UserError
from mining.settings.exclusion import COUNTRIES_FILE, CountryRule


@dataclass(frozen=True)
class CountryTable:
    adm0_a3: list[str]
    iso_a3_eh: list[str]
    sov_a3: list[str]
    sovereignt: list[str]
    admin: list[str]
    name: list[str]
    geometry: np.ndarray  # shapely geometries, lon/lat degrees


@lru_cache(maxsize=1)
def load_countries() -> CountryTable:
    """The shipped Natural Earth table (read once per process)."""
    with resources.files("mining").joinpath(COUNTRIES_FILE).open("rb") as fh:
        # ParquetFile, not read_table: read_table goes through pyarrow.dataset, whose import
        # (pandas included) cost ~0.3 s of every geofilter run
        t = pq.ParquetFile(fh).read().to_pydict()
    return CountryTable(
        adm0_a3=t["ADM0_A3"], iso_a3_eh=t["ISO_A3_EH"], sov_a3=t["SOV_A3"],
        sovereignt=t["SOVEREIGNT"], admin=t["ADMIN"], name=t["NAME"],
        geometry=shapely.from_wkb(t["geometry"]),
    )


def find_entry(code: str) -> int | None:
    """Row of the entry a manifest code names (ADM0_A3 first, then ISO_A3_EH)."""
    t = load_countries()
    code = code.upper()
    if code in t.adm0_a3:
        return t.adm0_a3.index(code)
    if code in t.iso_a3_eh:
        return t.iso_a3_eh.index(code)
    return None


def members(rule: CountryRule) -> list[int]:
    """Rows that a country rule excludes (the entry, plus its dependencies if asked)."""
    t = load_countries()
    i = find_entry(rule.code)
    if i is None:
        raise KeyError(rule.code)
    rows = [i]
    if rule.include_dependencies and t.admin[i] == t.sovereignt[i]:
        rows += [j for j, s in enumerate(t.sov_a3) if s == t.sov_a3[i] and j != i]
    return rows


def load_geojson(path) -> shapely.Geometry:
    """Union of the (Multi)Polygons in a GeoJSON geometry, Feature or FeatureCollection."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("type") == "FeatureCollection":
            geoms = [shape(f["geometry"]) for f in doc["features"]]
        elif doc.get("type") == "Feature":
            geoms = [shape(doc["geometry"])]
        else:
            geoms = [shape(doc)]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"cannot read GeoJSON {path}: {exc}") from None
    polys = [g for g in geoms if g.geom_type in ("Polygon", "MultiPolygon")]
    if not polys:
        raise UserError(f"GeoJSON {path} has no Polygon or MultiPolygon")
    return shapely.make_valid(shapely.union_all(polys))
