"""Fast point-in-region tests for many points: a coarse grid, then GEOS only near edges.

A global grid (0.25° cells) says for every cell "outside", "inside" or "edge". Most
points are decided by one array lookup; only points in edge cells reach
`shapely.intersects_xy` on the prepared geometry. That keeps a 1:10m coastline test at
tens of millions of points per second, whatever the number of islands.
"""

from __future__ import annotations

import numpy as np
import shapely

CELL_DEG = 0.25
_NLAT = int(180 / CELL_DEG)
_NLON = int(360 / CELL_DEG)
OUT, EDGE, IN = 0, 1, 2


def _cell_boxes(bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row/column indices and boxes of every grid cell that touches the given bounds."""
    x0, y0, x1, y1 = bounds
    c0, c1 = int(np.floor((x0 + 180) / CELL_DEG)), int(np.floor((x1 + 180) / CELL_DEG))
    r0, r1 = int(np.floor((y0 + 90) / CELL_DEG)), int(np.floor((y1 + 90) / CELL_DEG))
    c0, r0 = max(c0, 0), max(r0, 0)
    c1, r1 = min(c1, _NLON - 1), min(r1, _NLAT - 1)
    rows, cols = np.meshgrid(np.arange(r0, r1 + 1), np.arange(c0, c1 + 1), indexing="ij")
    rows, cols = rows.ravel(), cols.ravel()
    boxes = shapely.box(cols * CELL_DEG - 180, rows * CELL_DEG - 90,
                        (cols + 1) * CELL_DEG - 180, (rows + 1) * CELL_DEG - 90)
    return rows, cols, boxes


class PolygonIndex:
    """Vectorised "is (lon, lat) in this (multi)polygon, boundary included" for lon/lat degrees."""

    def __init__(self, geometry: shapely.Geometry):
        self.geometry = geometry
        shapely.prepare(geometry)
        self.grid = np.zeros((_NLAT, _NLON), dtype=np.int8)
        for part in shapely.get_parts(geometry):
            if part.is_empty:
                continue
            shapely.prepare(part)
            rows, cols, boxes = _cell_boxes(np.asarray(part.bounds))
            touch = shapely.intersects(part, boxes)
            inside = shapely.contains_properly(part, boxes)
            cur = self.grid[rows, cols]
            # A cell inside one part stays IN; a touched cell becomes at least EDGE.
            new = np.where(inside, IN, np.where(touch, np.maximum(cur, EDGE), cur))
            self.grid[rows, cols] = np.maximum(cur, new).astype(np.int8)

    def contains(self, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
        """Boolean mask; NaN coordinates are never inside."""
        lon = np.asarray(lon, dtype=np.float64)
        lat = np.asarray(lat, dtype=np.float64)
        ok = np.isfinite(lon) & np.isfinite(lat)
        col = np.clip(((np.where(ok, lon, 0.0) + 180.0) / CELL_DEG).astype(np.int64), 0, _NLON - 1)
        row = np.clip(((np.where(ok, lat, 0.0) + 90.0) / CELL_DEG).astype(np.int64), 0, _NLAT - 1)
        state = np.where(ok, self.grid[row, col], OUT)
        out = state == IN
        edge = np.flatnonzero(state == EDGE)
        if edge.size:
            out[edge] = shapely.intersects_xy(self.geometry, lon[edge], lat[edge])
        return out
