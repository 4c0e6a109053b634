"""Country exclusion on Natural Earth 1:10m admin-0 polygons shipped with the package.

Policy (explicit, because the data set has traps):
- A manifest code matches an entry's ADM0_A3 first, else its ISO_A3_EH (ISO_A3 is -99 for
  France and Norway, so it is never used).
- `include_dependencies: true` on a sovereign's home entry (ADMIN == SOVEREIGNT, e.g. GBR,
  FRA) adds every other entry with the same SOV_A3: for GBR, Jersey, Guernsey, Isle of Man,
  Gibraltar, the Falklands, Bermuda, the Sovereign Base Areas... France's overseas
  departments (Réunion, Guadeloupe, Martinique, Guyane, Mayotte) are part of France's own
  polygon, so they are excluded either way.
- The shoreline buffer grows the polygons into the sea only: the buffered shape minus every
  other country's polygon, so a town across a land border never counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import pyarrow.parquet as pq
import shapely

from mining.geofilter.manifest import CountryRule
from mining.geofilter.regions import PolygonIndex

DATA_FILE = "data/ne_10m_admin0.parquet"
KM_PER_DEG = 6371.0088 * np.pi / 180.0


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
    with resources.files("mining").joinpath(DATA_FILE).open("rb") as fh:
        t = pq.read_table(fh).to_pydict()
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


def is_known_code(code: str) -> bool:
    return find_entry(code) is not None


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


def _buffer_km(part: shapely.Geometry, km: float) -> shapely.Geometry:
    """Buffer a lon/lat polygon by about `km`, in a local equirectangular frame.

    Longitudes are scaled by cos(latitude of the part's centre) so the buffer is ~km in
    every direction (within a few % over a part the size of mainland France)."""
    lat0 = (part.bounds[1] + part.bounds[3]) / 2.0
    k = max(np.cos(np.radians(lat0)), 0.05)
    scale = np.array([k, 1.0])
    local = shapely.transform(part, lambda c: c * scale)
    grown = shapely.buffer(local, km / KM_PER_DEG, quad_segs=4)
    return shapely.transform(grown, lambda c: c / scale)


def country_region(rule: CountryRule, buffer_km: float) -> shapely.Geometry:
    """The excluded region of one rule: its polygons grown `buffer_km` into the sea only."""
    t = load_countries()
    rows = members(rule)
    own = shapely.union_all(t.geometry[rows])
    if buffer_km <= 0:
        return own
    others = np.array([g for j, g in enumerate(t.geometry) if j not in set(rows)], dtype=object)
    tree = shapely.STRtree(others)
    pieces = []
    for part in shapely.get_parts(own):
        grown = _buffer_km(part, buffer_km)
        near = tree.query(grown, predicate="intersects")
        if near.size:
            grown = shapely.difference(grown, shapely.union_all(others[near]))
        pieces.append(grown)
    return shapely.union_all(pieces + [own])


def country_index(rule: CountryRule, buffer_km: float) -> PolygonIndex:
    return PolygonIndex(country_region(rule, buffer_km))
