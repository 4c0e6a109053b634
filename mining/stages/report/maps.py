"""The geotag map: country outlines from the shipped Natural Earth polygons (mining/data/),
the manifest's excluded countries and areas shaded, a sample of kept and excluded geotags on top."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow.parquet as pq

from mining.files.names import CANDIDATES
from mining.settings.exclusion import BBoxArea, CircleArea, GeoJSONArea
from mining.stages.report.common import NA, SCATTER_SAMPLE, Inputs, log, png, run_manifest

SIMPLIFY_DEG = 0.05  # outlines only: 1:10m coastlines simplified to ~5 km keep the PNG small and fast


def _draw(ax: Any, geom: Any, **kw: Any) -> None:
    """Fill a shapely (multi)polygon's exteriors (holes are rare at this scale and not worth a path)."""
    import shapely

    for part in shapely.get_parts(geom):
        if part.geom_type != "Polygon" or part.is_empty:
            continue
        x, y = np.asarray(part.exterior.coords).T
        ax.fill(x, y, **kw)


def _excluded_shapes(inp: Inputs) -> list[tuple[str, Any]]:
    """(label, lon/lat geometry) of each country and area the manifest's geofilter excludes."""
    import shapely

    m = run_manifest(inp)
    recipe = getattr(m, "geofilter", None)
    if recipe is None:
        return []
    from mining.settings.geoshapes import load_countries, load_geojson, members

    out = []
    t = load_countries()
    for rule in recipe.countries:
        try:
            rows = members(rule)
        except KeyError:
            continue
        out.append((f"country:{rule.code}", shapely.union_all(t.geometry[rows])))
    for a in recipe.areas:
        if isinstance(a, CircleArea):  # a geodesic circle drawn in a local equirectangular frame
            deg = a.radius_km / 111.195
            ring = shapely.Point(0, 0).buffer(deg, quad_segs=16)
            scale = 1 / max(np.cos(np.radians(a.lat)), 1e-6)
            geom = shapely.transform(ring, lambda c: c * np.array([scale, 1.0]) + np.array([a.lon, a.lat]))
        elif isinstance(a, BBoxArea):
            geom = shapely.box(a.min_lon, a.min_lat, a.max_lon, a.max_lat)
        elif isinstance(a, GeoJSONArea):
            geom = load_geojson(a.path)
        else:
            continue
        out.append((f"area:{a.name}", geom))
    return out


def _extent(points: list[np.ndarray]) -> tuple[float, float, float, float]:
    """The points' bounding box with a margin (the world when they are spread over it)."""
    xy = np.concatenate([p for p in points if len(p)]) if any(len(p) for p in points) else np.zeros((0, 2))
    if not len(xy):
        return -180, 180, -90, 90
    lo, hi = np.percentile(xy, 0.5, axis=0), np.percentile(xy, 99.5, axis=0)
    pad = np.maximum((hi - lo) * 0.15, 1.0)
    x0, y0 = np.maximum(lo - pad, [-180, -90])
    x1, y1 = np.minimum(hi + pad, [180, 90])
    return float(x0), float(x1), float(y0), float(y1)


def geotags(inp: Inputs) -> str:
    """A sample of kept (candidates) and excluded (metadata not kept) geotags over country outlines."""
    if not inp.candidates or not (inp.candidates / CANDIDATES).is_file():
        return NA
    import pyarrow.dataset as ds

    rng = np.random.default_rng(0)
    kept = pq.read_table(inp.candidates / CANDIDATES, columns=["photo_id", "longitude", "latitude"]).to_pandas()
    kept_ids = np.unique(kept["photo_id"].to_numpy(np.int64))  # a Python set of 5M ids would cost ~0.5 GB
    kept = kept.dropna()
    if len(kept) > SCATTER_SAMPLE:
        kept = kept.iloc[rng.choice(len(kept), SCATTER_SAMPLE, replace=False)]
    excl = None
    parts = sorted(inp.metadata.rglob("*.parquet")) if inp.metadata else []
    if parts:
        meta = ds.dataset([str(p) for p in parts], format="parquet").head(
            20 * SCATTER_SAMPLE, columns=["photo_id", "longitude", "latitude"]).to_pandas().dropna()
        excl = meta[~np.isin(meta["photo_id"].to_numpy(np.int64), kept_ids)]
        if len(excl) > SCATTER_SAMPLE:
            excl = excl.iloc[rng.choice(len(excl), SCATTER_SAMPLE, replace=False)]
    pts = [kept[["longitude", "latitude"]].to_numpy(float)]
    if excl is not None:
        pts.append(excl[["longitude", "latitude"]].to_numpy(float))
    x0, x1, y0, y1 = _extent(pts)
    shapes = _safe(lambda: _excluded_shapes(inp), [])
    close = [(label, _close_up(g)) for label, g in shapes[:MAX_CLOSE_UPS]]
    close = [(label, b) for label, b in close if b is not None and (b[1] - b[0]) < (x1 - x0) / 4]
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(9, 4.8 + (3.2 if close else 0)))
    grid = fig.add_gridspec(2 if close else 1, max(1, len(close)), height_ratios=[4.8, 3.2] if close else [1])
    ax = fig.add_subplot(grid[0, :])
    _panel(ax, (x0, x1, y0, y1), kept, excl, shapes)
    ax.fill([], [], facecolor="#cc3311", alpha=0.18, label="excluded by the manifest (countries, areas)")
    ax.legend(loc="lower left", markerscale=4, fontsize=8)
    for i, (label, box) in enumerate(close):  # each excluded country or area close up: its border
        sub = fig.add_subplot(grid[1, i])
        _panel(sub, box, kept, excl, shapes, marker=6)
        sub.set_title(label, fontsize=9)
    note = "" if excl is not None else '<p class="na">excluded geotags: not available (no metadata parquet)</p>'
    return png(fig) + note


MAX_CLOSE_UPS = 4


def _safe(fn: Any, default: Any) -> Any:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - outlines are context; the points still tell the story
        log.warning("map outlines skipped: %s", exc)
        return default


def _close_up(geom: Any) -> tuple[float, float, float, float] | None:
    """A view of a shape's largest part (a country's mainland, not its overseas islands), with a margin."""
    import shapely

    parts = [g for g in shapely.get_parts(geom) if not g.is_empty]
    if not parts:
        return None
    big = max(parts, key=lambda g: g.area)
    bx0, by0, bx1, by1 = big.bounds
    pad = max(bx1 - bx0, by1 - by0) * 0.25 + 0.05
    return bx0 - pad, bx1 + pad, max(by0 - pad, -90), min(by1 + pad, 90)


def _panel(ax: Any, view: tuple[float, float, float, float], kept: Any, excl: Any, shapes: list[tuple[str, Any]],
           marker: float = 3) -> None:
    """Country outlines, the excluded shapes shaded, and the kept / excluded points, within a view."""
    import shapely

    x0, x1, y0, y1 = view
    ax.set_facecolor("#eaf2f8")
    tol = SIMPLIFY_DEG * max(0.2, (x1 - x0) / 60)

    def clip(g: Any) -> Any:
        return shapely.simplify(shapely.clip_by_rect(g, x0 - 1, y0 - 1, x1 + 1, y1 + 1), tol)

    def outlines() -> None:
        from mining.settings.geoshapes import load_countries

        world = load_countries().geometry
        for g in clip(world[shapely.intersects(world, shapely.box(x0, y0, x1, y1))]):
            _draw(ax, g, facecolor="#fbfbf8", edgecolor="#888888", lw=0.4)
        for label, g in shapes:
            g = clip(g)
            _draw(ax, g, facecolor="#cc3311", alpha=0.18, edgecolor="#cc3311", lw=0.6)
            if not g.is_empty:
                c = g.representative_point()
                if x0 <= c.x <= x1 and y0 <= c.y <= y1:
                    ax.annotate(label, (c.x, c.y), fontsize=7, color="#882200", ha="center")

    _safe(outlines, None)
    if excl is not None:
        ax.scatter(excl["longitude"], excl["latitude"], s=marker, c="#cc3311", alpha=0.7, label=f"excluded (sample of {len(excl)})")
    ax.scatter(kept["longitude"], kept["latitude"], s=marker, c="#0077bb", alpha=0.7, label=f"kept (sample of {len(kept)})")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect(1 / max(np.cos(np.radians((y0 + y1) / 2)), 0.2))
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude")
