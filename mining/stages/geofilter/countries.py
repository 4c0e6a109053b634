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

import numpy as np
import shapely

from mining.settings.exclusion import CountryRule
from mining.settings.geoshapes import load_countries, members
from mining.stages.geofilter.regions import PolygonIndex

KM_PER_DEG = 6371.0088 * np.pi / 180.0


def _local_scale(geom: shapely.Geometry) -> np.ndarray:
    """(cos(lat0), 1): lon/lat → a local equirectangular frame where degrees are ~isotropic."""
    lat0 = (geom.bounds[1] + geom.bounds[3]) / 2.0
    return np.array([max(np.cos(np.radians(lat0)), 0.05), 1.0])


def _to_local(geom: shapely.Geometry, scale: np.ndarray) -> shapely.Geometry:
    return shapely.transform(geom, lambda c: c * scale)


def _from_local(geom: shapely.Geometry, scale: np.ndarray) -> shapely.Geometry:
    return shapely.transform(geom, lambda c: c / scale)


@dataclass
class _Contested:
    """Sea within the buffer of this country AND of a foreign one: the nearer coast wins."""

    zone: shapely.Geometry  # lon/lat
    scale: np.ndarray
    own: shapely.Geometry  # local frame
    other: shapely.Geometry  # local frame

    def __post_init__(self) -> None:
        for g in (self.zone, self.own, self.other):
            shapely.prepare(g)
        self.bounds = np.asarray(self.zone.bounds)


class CountryRegion:
    """Point test for one country rule: `sure` (land + uncontested sea buffer) via the grid
    index, then the contested strips (e.g. the sea off Monaco, Lough Foyle, De Panne),
    where a point counts only if it is at least as close to this country's coast."""

    def __init__(self, sure: shapely.Geometry, contested: list[_Contested]):
        self.geometry = sure
        self.sure = PolygonIndex(sure)
        self.contested = contested

    def contains(self, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
        out = self.sure.contains(lon, lat)
        for c in self.contested:
            x0, y0, x1, y1 = c.bounds
            cand = np.flatnonzero(~out & (lon >= x0) & (lon <= x1) & (lat >= y0) & (lat <= y1))
            if cand.size == 0:
                continue
            cand = cand[shapely.intersects_xy(c.zone, lon[cand], lat[cand])]
            if cand.size == 0:
                continue
            pts = shapely.points(lon[cand] * c.scale[0], lat[cand])
            out[cand[shapely.distance(c.own, pts) <= shapely.distance(c.other, pts)]] = True
        return out


@lru_cache(maxsize=16)
def country_region(rule: CountryRule, buffer_km: float) -> CountryRegion:
    """The excluded region of one rule: its polygons grown `buffer_km` into the sea only.

    Each polygon part is buffered in its own local frame (longitudes scaled by cos of its
    mid-latitude: ~km in every direction, within a few % over a part the size of mainland
    France). Foreign land is cut out, so nothing crosses a land border; sea that is also
    within `buffer_km` of a foreign coast is settled point by point (nearer coast wins)."""
    t = load_countries()
    rows = members(rule)
    own = shapely.union_all(t.geometry[rows])
    if buffer_km <= 0:
        return CountryRegion(own, [])
    r = buffer_km / KM_PER_DEG
    row_set = set(rows)
    others = np.array([g for j, g in enumerate(t.geometry) if j not in row_set], dtype=object)
    tree = shapely.STRtree(others)
    pieces, contested = [own], []
    for part in shapely.get_parts(own):
        scale = _local_scale(part)
        part_l = _to_local(part, scale)
        grown_l = shapely.buffer(part_l, r, quad_segs=4)
        reach = _from_local(shapely.buffer(part_l, 2.05 * r, quad_segs=4), scale)
        near = tree.query(reach, predicate="intersects")
        if near.size == 0:
            pieces.append(_from_local(grown_l, scale))
            continue
        rect = reach.bounds
        other_l = _to_local(shapely.union_all(shapely.clip_by_rect(others[near], *rect)), scale)
        own_l = _to_local(shapely.clip_by_rect(own, *rect), scale)
        grown_l = shapely.difference(grown_l, other_l)
        zone_l = shapely.difference(shapely.intersection(grown_l, shapely.buffer(other_l, r, quad_segs=4)), own_l)
        if not zone_l.is_empty and zone_l.area > 0:
            grown_l = shapely.difference(grown_l, zone_l)
            contested.append(_Contested(_from_local(zone_l, scale), scale, own_l, other_l))
        pieces.append(_from_local(grown_l, scale))
    return CountryRegion(shapely.union_all(pieces), contested)
