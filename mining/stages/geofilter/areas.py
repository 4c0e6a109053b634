"""Area exclusion: centre + geodesic radius, bbox, or a GeoJSON polygon.

Circles: a latitude band and a numpy haversine decide almost every point; only points whose
haversine distance is within the sphere-vs-ellipsoid error (< 0.6 %) of the radius get the
exact WGS-84 geodesic from geopy, so results equal a geodesic test everywhere.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from mining.settings.exclusion import Area, BBoxArea, CircleArea, GeoJSONArea
from mining.stages.geofilter.regions import PolygonIndex
from mining.settings.geoshapes import load_geojson

EARTH_RADIUS_KM = 6371.0088
# Haversine (mean sphere) vs WGS-84 geodesic: relative error below 0.56 %; keep a margin.
_EDGE_REL = 0.006
_EDGE_ABS_KM = 0.01

Mask = Callable[[np.ndarray, np.ndarray], np.ndarray]


def haversine_km(lat0: float, lon0: float, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    p0, p = np.radians(lat0), np.radians(lat)
    dphi = p - p0
    dlmb = np.radians(lon - lon0)
    a = np.sin(dphi / 2) ** 2 + np.cos(p0) * np.cos(p) * np.sin(dlmb / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))


def circle_mask(area: CircleArea) -> Mask:
    from geopy.distance import geodesic

    band_deg = area.radius_km * (1 + _EDGE_REL) / 110.5 + 0.01  # a degree of latitude is >= 110.57 km

    def mask(lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
        out = np.zeros(lat.shape, dtype=bool)
        cand = np.flatnonzero(np.abs(lat - area.lat) <= band_deg)  # NaN compares False
        if cand.size == 0:
            return out
        d = haversine_km(area.lat, area.lon, lat[cand], lon[cand])
        margin = area.radius_km * _EDGE_REL + _EDGE_ABS_KM
        out[cand[d <= area.radius_km - margin]] = True
        edge = cand[np.abs(d - area.radius_km) < margin]
        for i in edge:  # exact, slow (~14k/s), only in a thin ring
            out[i] = geodesic((area.lat, area.lon), (lat[i], lon[i])).km <= area.radius_km
        return out

    return mask


def bbox_mask(area: BBoxArea) -> Mask:
    def mask(lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
        in_lat = (lat >= area.min_lat) & (lat <= area.max_lat)
        if area.min_lon <= area.max_lon:
            in_lon = (lon >= area.min_lon) & (lon <= area.max_lon)
        else:  # crosses the antimeridian
            in_lon = (lon >= area.min_lon) | (lon <= area.max_lon)
        return in_lat & in_lon

    return mask


def area_mask(area: Area) -> Mask:
    """A function (lon, lat arrays) -> boolean mask of the points inside the area."""
    if isinstance(area, CircleArea):
        return circle_mask(area)
    if isinstance(area, BBoxArea):
        return bbox_mask(area)
    if isinstance(area, GeoJSONArea):
        return PolygonIndex(load_geojson(area.path)).contains
    raise TypeError(area)
