"""`mining geofilter`: real places against the shipped Natural Earth polygons, geodesic radii,
manifest validation, sampling, the stats funnel and the CLI."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from geopy.distance import geodesic

from mining.cli import main
from mining.errors import UserError
from mining.stages.geofilter import filter as gf
from mining.stages.geofilter.stage import load, run
from mining.stages.geofilter.areas import area_mask
from mining.settings.geoshapes import load_countries, members
from mining.stages.geofilter.countries import country_region
from mining.settings.exclusion import BBoxArea, CircleArea, CountryRule, GeoJSONArea, parse_coordinate
from paths import DATA

# (place, lat, lon) - town centres; the expected country is in the test tables below.
UK_SIDE = {
    "Newry": (54.1751, -6.3402),
    "Derry": (54.9966, -7.3086),
    "Strabane": (54.8270, -7.4630),
    "Belcoo": (54.2960, -7.8730),
    "Warrenpoint": (54.1020, -6.2510),
}
IRELAND_SIDE = {
    "Dundalk": (54.0090, -6.4049),
    "Lifford": (54.8330, -7.4930),
    "Buncrana": (55.1333, -7.4500),
    "Muff": (55.0667, -7.2667),  # ~100 m from the border: the shoreline buffer must not cross it
    "Bridgend": (55.0453, -7.3878),
    "Omeath": (54.0886, -6.2608),
}
FRANCE_SIDE = {
    "Lille": (50.6292, 3.0573),
    "Strasbourg": (48.5734, 7.7521),
    "Annemasse": (46.1934, 6.2342),
    "Saint-Julien-en-Genevois": (46.1441, 6.0817),
    "Calais": (50.9513, 1.8587),
    "Nice": (43.7102, 7.2620),
    "Saint-Malo": (48.6493, -2.0257),
    "Ajaccio (Corsica)": (41.9192, 8.7386),
    "Saint-Denis (Réunion)": (-20.8821, 55.4507),
    "Pointe-à-Pitre (Guadeloupe)": (16.2411, -61.5331),
    "Cayenne": (4.9224, -52.3135),
}
FRANCE_NEIGHBOURS = {
    "Tournai": (50.6056, 3.3878),
    "Mouscron": (50.7446, 3.2066),
    "Kehl": (48.5726, 7.8150),
    "Geneva": (46.2044, 6.1432),
    "Monaco": (43.7384, 7.4246),
    "Paramaribo": (5.8520, -55.2038),
}
UK_COAST = {
    "Dover": (51.1279, 1.3134),
    "Dover harbour": (51.1200, 1.3300),
    "Brighton": (50.8225, -0.1372),
    "Brighton pier": (50.8163, -0.1372),
    "St Ives": (50.2083, -5.4907),
    "Newport (Isle of Wight)": (50.7000, -1.2900),
}
AT_SEA = {
    "English Channel": (50.2, -0.5),
    "North Sea": (55.0, 3.0),
    "Strait of Dover": (51.0, 1.5),
    "Irish Sea": (53.8, -5.0),
    "Bay of Biscay": (46.0, -4.0),
}
ST_HELIER = (49.1858, -2.1100)


def _contains(rule: CountryRule, places: dict, buffer_km: float = 1.5) -> dict[str, bool]:
    return _hits(country_region(rule, buffer_km), places)


@pytest.fixture(scope="module")
def gbr():
    return country_region(CountryRule("GBR", True), 1.5)


@pytest.fixture(scope="module")
def fra():
    return country_region(CountryRule("FRA", True), 1.5)


def _hits(idx, places):
    lat = np.array([p[0] for p in places.values()])
    lon = np.array([p[1] for p in places.values()])
    return dict(zip(places, idx.contains(lon, lat).tolist()))


def test_uk_ireland_border(gbr):
    assert _hits(gbr, UK_SIDE) == {k: True for k in UK_SIDE}
    assert _hits(gbr, IRELAND_SIDE) == {k: False for k in IRELAND_SIDE}


def test_france_borders_and_overseas_departments(fra):
    assert _hits(fra, FRANCE_SIDE) == {k: True for k in FRANCE_SIDE}
    assert _hits(fra, FRANCE_NEIGHBOURS) == {k: False for k in FRANCE_NEIGHBOURS}


def test_coastal_towns_need_the_shoreline_buffer(gbr):
    assert _hits(gbr, UK_COAST) == {k: True for k in UK_COAST}
    # Without the buffer the pier and the harbour (geotags just off the 1:10m coast) fall out.
    bare = _contains(CountryRule("GBR", True), UK_COAST, buffer_km=0)
    assert not bare["Brighton pier"] and not bare["Dover harbour"]


def test_points_at_sea_are_kept(gbr, fra):
    assert not any(_hits(gbr, AT_SEA).values())
    assert not any(_hits(fra, AT_SEA).values())


def test_jersey_only_with_dependencies():
    assert _contains(CountryRule("GBR", True), {"St Helier": ST_HELIER})["St Helier"]
    assert not _contains(CountryRule("GBR", False), {"St Helier": ST_HELIER})["St Helier"]
    assert _contains(CountryRule("JEY", False), {"St Helier": ST_HELIER})["St Helier"]
    # Jersey is a few km from France's coast but Natural Earth does not put it in France.
    assert not _contains(CountryRule("FRA", True), {"St Helier": ST_HELIER})["St Helier"]


def test_dependency_policy_follows_the_sovereign():
    t = load_countries()
    gbr = {t.adm0_a3[i] for i in members(CountryRule("GBR", True))}
    assert {"GBR", "JEY", "GGY", "IMN", "GIB", "FLK"} <= gbr and "IRL" not in gbr
    assert {t.adm0_a3[i] for i in members(CountryRule("GBR", False))} == {"GBR"}
    # A dependency is not a sovereign: asking for Jersey's "dependencies" adds nothing.
    assert {t.adm0_a3[i] for i in members(CountryRule("JEY", True))} == {"JEY"}
    # Norway's ISO_A3 is -99 in Natural Earth; the code still resolves.
    assert {t.adm0_a3[i] for i in members(CountryRule("NOR", False))} == {"NOR"}


def test_buffer_never_enters_a_neighbour():
    region = country_region(CountryRule("FRA", False), 1.5)
    t = load_countries()
    for code in ("BEL", "DEU", "CHE", "ITA", "ESP", "LUX"):
        overlap = region.geometry.intersection(t.geometry[t.adm0_a3.index(code)]).area
        assert overlap < 1e-9, code


def _destination(lat, lon, bearing, km):
    p = geodesic(kilometers=km).destination((lat, lon), bearing)
    return p.latitude, p.longitude


def test_radius_matches_geodesic_just_inside_and_outside():
    area = CircleArea("las-vegas", 36.17, -115.14, 40.0)
    pts = []
    for bearing in range(0, 360, 15):
        for km in (39.95, 39.99, 39.999, 40.001, 40.01, 40.05, 39.8, 40.2, 10, 80):
            pts.append(_destination(area.lat, area.lon, bearing, km))
    lat = np.array([p[0] for p in pts])
    lon = np.array([p[1] for p in pts])
    got = area_mask(area)(lon, lat)
    want = np.array([geodesic((area.lat, area.lon), p).km <= 40.0 for p in pts])
    assert got.tolist() == want.tolist()
    assert 0 < got.sum() < len(pts)


def test_radius_across_the_antimeridian_and_nan():
    area = CircleArea("fiji-ish", -17.0, 179.9, 50.0)
    lat = np.array([-17.0, -17.0, -17.0, np.nan])
    lon = np.array([-179.8, 179.0, 179.95, np.nan])
    assert area_mask(area)(lon, lat).tolist() == [True, False, True, False]


def test_bbox_and_geojson_areas(tmp_path):
    box = area_mask(BBoxArea("box", -116.0, 35.5, -114.5, 36.5))
    assert box(np.array([-115.14, -117.0]), np.array([36.17, 36.17])).tolist() == [True, False]
    wrap = area_mask(BBoxArea("wrap", 170.0, -20.0, -170.0, 0.0))
    assert wrap(np.array([175.0, -175.0, 0.0]), np.array([-10.0, -10.0, -10.0])).tolist() == [True, True, False]
    gj = tmp_path / "tri.geojson"
    gj.write_text(json.dumps({"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {},
        "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [10, 0], [0, 10], [0, 0]]]}}]}))
    tri = area_mask(GeoJSONArea("tri", gj))
    assert tri(np.array([1.0, 6.0, 5.0, 0.0]), np.array([1.0, 6.0, 5.0, 5.0])).tolist() == [True, False, True, True]


@pytest.mark.parametrize("text,want", [
    ("36.17 N, 115.14 W", (36.17, -115.14)),
    ("36.17N 115.14W", (36.17, -115.14)),
    ("36.17, -115.14", (36.17, -115.14)),
    ("33.87 S, 151.21 E", (-33.87, 151.21)),
    ("36°10'12\" N, 115°8'24\" W", (36.17, -115.14)),
    ([36.17, -115.14], (36.17, -115.14)),
])
def test_coordinates_parse(text, want):
    lat, lon = parse_coordinate(text)
    assert lat == pytest.approx(want[0]) and lon == pytest.approx(want[1])


@pytest.mark.parametrize("text", [
    "36 10 12 N 115 8 24 W",  # geopy silently reads this as (8, -24)
    "36 10 12 N, 115 8 24 W",
    "115.14 W, 36.17 N",      # longitude first
    "36.17 -115.14",          # no comma: ambiguous
    "-36.17 N, 115.14 W",     # sign and hemisphere
    "36.17 N, 195 W",         # geopy would wrap to 165 E
    "36°70' N, 115° W",       # 70 minutes
    "95, 10",
    "Las Vegas",
    [200.0, 10.0],
    [36.17],
])
def test_bad_coordinates_are_rejected(text):
    with pytest.raises(ValueError):
        parse_coordinate(text)


# Manifests -------------------------------------------------------------------------------

def _manifest(tmp_path, body: str, name="m.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


GOOD = """\
name: t
download: {anything: goes}   # other stages' sections are not ours to check
geofilter:
  countries:
    - {code: GBR, include_dependencies: true}
  areas:
    - {name: las-vegas, center: "36.17 N, 115.14 W", radius_km: 40}
  photos_only: true
  require_geotag: true
"""


@pytest.mark.parametrize("body,needle", [
    (GOOD.replace("  photos_only: true", "  photo_only: true"), "line 8: geofilter.photo_only: unknown key 'photo_only'"),
    (GOOD.replace("GBR", "XYZ"), "line 5: geofilter.countries[0].code: unknown country code 'XYZ'"),
    (GOOD.replace("radius_km: 40", "radius_km: -5"), "line 7: geofilter.areas[0].radius_km"),
    (GOOD.replace('"36.17 N, 115.14 W"', '"36 10 12 N 115 8 24 W"'), "line 7: geofilter.areas[0].center: cannot parse"),
    (GOOD.replace(", radius_km: 40", ""), "geofilter.areas[0]"),
    (GOOD.replace("include_dependencies: true", "include_deps: true"), "unknown key 'include_deps'"),
    (GOOD + "  sample: {n: 0}\n", "geofilter.sample.n"),
    (GOOD + "  min_accuracy: 17\n", "geofilter.min_accuracy"),
    ("name: t\n", "no geofilter: section"),
    ("geofilter: [\n", "not valid YAML"),
])
def test_manifest_errors_name_the_key_and_line(tmp_path, body, needle):
    p = _manifest(tmp_path, body)
    with pytest.raises(UserError) as exc:
        load(p)
    assert needle in str(exc.value)
    assert "\n" not in str(exc.value)


def test_good_manifest_and_r1m_recipe(tmp_path):
    r = load(_manifest(tmp_path, GOOD))
    assert r.countries == (CountryRule("GBR", True),)
    assert r.areas == (CircleArea("las-vegas", 36.17, -115.14, 40.0),)
    r1m = load("manifests/r1m.yaml")
    assert {c.code for c in r1m.countries} == {"GBR", "FRA"}
    assert [a.name for a in r1m.areas] == ["las-vegas"]
    assert r1m.photos_only and r1m.require_geotag and r1m.sample_n == 5_000_000


def test_geojson_path_is_relative_to_the_manifest(tmp_path):
    body = "geofilter:\n  areas:\n    - {name: zone, geojson: zone.geojson}\n"
    with pytest.raises(UserError, match="line 3: geofilter.areas\\[0\\].geojson: GeoJSON file not found"):
        load(_manifest(tmp_path, body))
    (tmp_path / "zone.geojson").write_text(json.dumps({"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]}))
    assert load(_manifest(tmp_path, body)).areas[0].path == tmp_path / "zone.geojson"


# The streaming filter ---------------------------------------------------------------------

LICENSES = [("Attribution License", "http://creativecommons.org/licenses/by/2.0/"),
            ("Attribution-NonCommercial License", "http://creativecommons.org/licenses/by-nc/2.0/")]
PLACES = {**UK_SIDE, **IRELAND_SIDE, **FRANCE_SIDE, **FRANCE_NEIGHBOURS, **UK_COAST, **AT_SEA,
          "Las Vegas Strip": (36.1147, -115.1728), "Henderson": (36.0395, -114.9817), "Los Angeles": (34.05, -118.24)}


def write_metadata(folder, n=4000, seed=1, parts=2, dup_ids=False):
    """A metadata dataset in the `mining ingest` schema (docs/formats.md) with known geotags."""
    rng = np.random.default_rng(seed)
    names = list(PLACES)
    place = rng.integers(0, len(names), n)
    lat = np.array([PLACES[names[i]][0] for i in place])
    lon = np.array([PLACES[names[i]][1] for i in place])
    geotagged = rng.random(n) < 0.7
    lic = rng.integers(0, len(LICENSES), n)
    ids = np.arange(1_000_000, 1_000_000 + n, dtype=np.int64)
    if dup_ids:
        ids[n // 2:] = ids[: n - n // 2]
    table = pa.table({
        "photo_id": ids,
        "photo_hash": pa.array([None] * n, pa.string()),
        "user_nsid": [f"{i}@N00" for i in range(n)],
        "title": [f"photo {i}" for i in range(n)],
        "user_tags": pa.array([["a", "b"]] * n, pa.list_(pa.string())),
        "longitude": pa.array(np.where(geotagged, lon, np.nan), pa.float64(), from_pandas=True),
        "latitude": pa.array(np.where(geotagged, lat, np.nan), pa.float64(), from_pandas=True),
        "accuracy": pa.array(rng.integers(1, 17, n).astype(np.int8), mask=~geotagged),
        "license_name": [LICENSES[i][0] for i in lic],
        "license_url": [LICENSES[i][1] for i in lic],
        "marker": pa.array((rng.random(n) < 0.1).astype(np.int8)),
    })
    folder.mkdir(parents=True, exist_ok=True)
    step = -(-n // parts)
    for k in range(parts):
        pq.write_table(table.slice(k * step, step), folder / f"part-{k:05d}.parquet")
    (folder / "stats.json").write_text("{}")
    return table, [names[i] for i in place], geotagged


def _recipe(tmp_path, extra=""):
    return load(_manifest(tmp_path, GOOD.replace("name: t\n", "") + extra, name="r.yaml"))


def test_filter_funnel_adds_up_and_excludes_the_right_rows(tmp_path):
    meta = tmp_path / "meta"
    table, place, geotagged = write_metadata(meta)
    recipe = _recipe(tmp_path, "  licenses: [\"http://creativecommons.org/licenses/by/2.0/\"]\n  min_accuracy: 6\n")
    stats = run(metadata=meta, out=tmp_path / "out", options=recipe, progress=False)
    assert stats == json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["rows_in"] == table.num_rows
    assert stats["rows_in"] == stats["rows_out"] + sum(stats["excluded"].values())
    out = pq.read_table(tmp_path / "out" / "candidates.parquet")
    assert out.num_rows == stats["rows_out"] > 0
    assert out.schema.names == table.schema.names
    kept = set(out["photo_id"].to_pylist())
    # Expected by hand, reason by reason, in the documented order.
    marker = table["marker"].to_numpy()
    acc = table["accuracy"].to_numpy()
    url = table["license_url"].to_pylist()
    expect = {"no_geotag": 0, "video": 0, "license": 0, "accuracy": 0, "country:GBR": 0, "area:las-vegas": 0}
    want_kept = set()
    for i, pid in enumerate(table["photo_id"].to_pylist()):
        name = place[i]
        if not geotagged[i]:
            expect["no_geotag"] += 1
        elif marker[i] == 1:
            expect["video"] += 1
        elif url[i] != LICENSES[0][1]:
            expect["license"] += 1
        elif acc[i] < 6:
            expect["accuracy"] += 1
        elif name in UK_SIDE or name in UK_COAST:
            expect["country:GBR"] += 1
        elif name in ("Las Vegas Strip", "Henderson"):
            expect["area:las-vegas"] += 1
        else:
            want_kept.add(pid)
    assert stats["excluded"] == expect
    assert kept == want_kept
    assert all(v > 0 for v in expect.values())


def test_sample_is_deterministic_exact_and_split_independent(tmp_path, monkeypatch):
    meta = tmp_path / "meta"
    write_metadata(meta, n=3000, parts=3)
    recipe = _recipe(tmp_path, "  sample: {n: 300, seed: 7}\n")
    a = run(metadata=meta, out=tmp_path / "a", options=recipe, progress=False)
    b = run(metadata=meta, out=tmp_path / "b", options=recipe, progress=False)
    ids_a = pq.read_table(tmp_path / "a" / "candidates.parquet")["photo_id"].to_pylist()
    ids_b = pq.read_table(tmp_path / "b" / "candidates.parquet")["photo_id"].to_pylist()
    assert a == b and ids_a == ids_b and len(ids_a) == 300 == a["rows_out"]
    assert a["excluded"]["sampled_out"] > 0
    assert a["rows_in"] == a["rows_out"] + sum(a["excluded"].values())
    # Same rows whatever the batch size (the pruning threshold kicks in mid-stream).
    monkeypatch.setattr(gf, "BATCH_ROWS", 97)
    c = run(metadata=meta, out=tmp_path / "c", options=recipe, progress=False)
    assert pq.read_table(tmp_path / "c" / "candidates.parquet")["photo_id"].to_pylist() == ids_a and c == a
    # The sample is a subset of the unsampled survivors; another seed gives other rows.
    full = run(metadata=meta, out=tmp_path / "full", options=_recipe(tmp_path), progress=False)
    full_ids = set(pq.read_table(tmp_path / "full" / "candidates.parquet")["photo_id"].to_pylist())
    assert set(ids_a) <= full_ids and full["rows_out"] == a["rows_out"] + a["excluded"]["sampled_out"]
    other = run(metadata=meta, out=tmp_path / "d", options=_recipe(tmp_path, "  sample: {n: 300, seed: 8}\n"),
                progress=False)
    ids_d = pq.read_table(tmp_path / "d" / "candidates.parquet")["photo_id"].to_pylist()
    assert other["rows_out"] == 300 and set(ids_d) != set(ids_a)


def test_sample_larger_than_survivors_keeps_all(tmp_path):
    meta = tmp_path / "meta"
    write_metadata(meta, n=500)
    s = run(metadata=meta, out=tmp_path / "o", options=_recipe(tmp_path, "  sample: {n: 100000}\n"), progress=False)
    assert s["excluded"]["sampled_out"] == 0 and s["rows_out"] > 0


def test_sample_with_duplicate_ids_is_still_exact(tmp_path):
    meta = tmp_path / "meta"
    write_metadata(meta, n=2000, dup_ids=True)
    s = run(metadata=meta, out=tmp_path / "o", options=_recipe(tmp_path, "  sample: {n: 101, seed: 3}\n"),
            progress=False)
    assert s["rows_out"] == 101 == pq.read_metadata(tmp_path / "o" / "candidates.parquet").num_rows


def test_sample_keys_are_uniform():
    keys = gf.sample_keys(np.arange(200_000, dtype=np.int64), 0)
    top = (keys >> np.uint64(60)).astype(np.int64)  # 16 buckets
    counts = np.bincount(top, minlength=16)
    assert counts.min() > 0.9 * 200_000 / 16 and counts.max() < 1.1 * 200_000 / 16


def test_missing_column_is_a_user_error(tmp_path):
    meta = tmp_path / "meta"
    meta.mkdir()
    pq.write_table(pa.table({"photo_id": [1], "latitude": [1.0], "longitude": [1.0]}), meta / "part-0.parquet")
    with pytest.raises(UserError, match="lacks column.*marker"):
        run(metadata=meta, out=tmp_path / "o", options=_recipe(tmp_path), progress=False)


# CLI ----------------------------------------------------------------------------------------

def test_cli_end_to_end(tmp_path, capsys):
    meta = tmp_path / "meta"
    write_metadata(meta, n=300)
    m = _manifest(tmp_path, GOOD)
    rc = main(["geofilter", "--metadata", str(meta), "--manifest", str(m), "--out", str(tmp_path / "o"), "--no-progress"])
    assert rc == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "o" / "stats.json").read_text())
    assert not [p for p in (tmp_path / "o").iterdir() if p.name.startswith(".")]


def test_cli_errors_are_one_line_exit_2(tmp_path, capsys):
    bad = _manifest(tmp_path, GOOD.replace("GBR", "UKX"))
    # Manifest validation comes before the (missing) metadata is touched.
    rc = main(["geofilter", "--metadata", str(tmp_path / "nowhere"), "--manifest", str(bad), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown country code 'UKX'" in err and err.count("\n") == 1
    rc = main(["geofilter", "--metadata", str(tmp_path / "nowhere"), "--manifest", str(_manifest(tmp_path, GOOD)), "--out", str(tmp_path / "o")])
    assert rc == 2 and "metadata not found" in capsys.readouterr().err
    rc = main(["geofilter", "--metadata", str(tmp_path), "--manifest", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "o")])
    assert rc == 2 and "cannot read manifest" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_shared_sea_goes_to_the_nearer_coast(fra, gbr):
    # Sea off Monaco's harbour is within 1.5 km of France too, but nearer to Monaco.
    monaco_sea = {"Port Hercule mouth": (43.7365, 7.4275), "Larvotto beach": (43.7453, 7.4340)}
    assert _hits(fra, monaco_sea) == {k: False for k in monaco_sea}
    # ... while the sea off Menton (France, next to the Italian border) is France's.
    assert _hits(fra, {"Menton beach": (43.7760, 7.4990)}) == {"Menton beach": True}
    # Lough Foyle / Carlingford Lough: Irish shores stay in, Northern Irish ones are out.
    assert not any(_hits(gbr, {"Greencastle": (55.2033, -6.9858), "Omeath": (54.0886, -6.2608)}).values())


# real rows, copied into tests/data (provenance: its README.md; see docs/references.md)
SAMPLE = DATA / "yfcc100m_sample/yfcc100m_webscope23_dongwookim-ml_flickr-photo.tsv"


def test_round_trip_on_real_yfcc_rows(tmp_path, capsys):
    """Real YFCC100M rows (Seattle, Connecticut, Victoria and Melbourne in Australia) through
    `mining ingest` and `mining geofilter`, each row dropped for a known reason."""
    meta = tmp_path / "meta"
    assert main(["ingest", str(SAMPLE), "--out", str(meta)]) == 0
    m = _manifest(tmp_path, """\
        geofilter:
          countries: [{code: AUS, include_dependencies: false}]
          areas: [{name: seattle, center: "47.6062 N, 122.3321 W", radius_km: 10}]
          licenses: ["Attribution License", "http://creativecommons.org/licenses/by-nc/2.0/"]
        """)
    capsys.readouterr()
    assert main(["geofilter", "--metadata", str(meta), "--manifest", str(m), "--out", str(tmp_path / "c"), "--no-progress"]) == 0
    stats = json.loads((tmp_path / "c" / "stats.json").read_text())
    assert stats["rows_in"] == 4 and stats["rows_out"] == 1
    assert stats["excluded"] == {"no_geotag": 0, "video": 0, "license": 1, "country:AUS": 1, "area:seattle": 1}
    out = pq.read_table(tmp_path / "c" / "candidates.parquet")
    src = pa.concat_tables([pq.read_table(p) for p in sorted(meta.glob("part-*.parquet"))])
    row = src.filter(pa.compute.equal(src["photo_id"], 343224206))
    assert out.to_pylist() == row.to_pylist()  # the Connecticut photo, every column intact


def test_grid_index_agrees_with_plain_geos(gbr):
    """The 0.25° grid shortcut gives exactly what GEOS gives, incl. points on cell edges."""
    import shapely

    from mining.stages.geofilter.regions import PolygonIndex

    rng = np.random.default_rng(0)
    lon = np.concatenate([rng.uniform(-11, 3, 20000), np.arange(-8.0, 2.0, 0.25)])
    lat = np.concatenate([rng.uniform(49, 61, 20000), np.full(40, 52.0)])
    idx = PolygonIndex(gbr.geometry)
    want = shapely.intersects_xy(gbr.geometry, lon, lat)
    assert idx.contains(lon, lat).tolist() == want.tolist()
    assert 0.05 < want.mean() < 0.6


# One photo, one candidate ----------------------------------------------------

PARIS, TOKYO = (48.8566, 2.3522), (35.6762, 139.6503)
# (photo id, place, marker, title): photo 100 is in Paris once and in Tokyo twice
SAME_PHOTO_ROWS = [
    (100, PARIS, 0, "100 paris"), (200, TOKYO, 0, "200 first"), (100, TOKYO, 0, "100 tokyo a"),
    (300, TOKYO, 0, "300"), (200, TOKYO, 0, "200 second"), (100, TOKYO, 0, "100 tokyo b"),
    (400, PARIS, 0, "400"), (500, TOKYO, 1, "500 video"), (500, TOKYO, 0, "500 photo"),
    (600, None, 0, "600 no geotag"), (600, PARIS, 0, "600 paris"),
]
FRANCE_ONLY = """\
geofilter:
  countries: [{code: FRA, include_dependencies: false}]
"""


def _rows_table(rows) -> pa.Table:
    return pa.table({
        "photo_id": pa.array([r[0] for r in rows], pa.int64()),
        "latitude": pa.array([r[1][0] if r[1] else None for r in rows], pa.float64()),
        "longitude": pa.array([r[1][1] if r[1] else None for r in rows], pa.float64()),
        "marker": pa.array([r[2] for r in rows], pa.int8()),
        "title": [r[3] for r in rows],
    })


@pytest.mark.parametrize("order", ["as listed", "reversed, 3 parts, tiny batches and buckets"])
def test_a_photo_on_several_rows_is_one_candidate_or_none(tmp_path, monkeypatch, order):
    rows = SAME_PHOTO_ROWS if order == "as listed" else SAME_PHOTO_ROWS[::-1]
    meta = tmp_path / "meta"
    meta.mkdir()
    table = _rows_table(rows)
    if order == "as listed":
        pq.write_table(table, meta / "part-00000.parquet")
    else:
        monkeypatch.setattr(gf, "BATCH_ROWS", 2)
        monkeypatch.setattr(gf, "BUCKET_ROWS", 3)  # 4 spill buckets
        for k, (start, length) in enumerate(((0, 4), (4, 3), (7, 4))):
            pq.write_table(table.slice(start, length), meta / f"part-{k:05d}.parquet", row_group_size=2)
    stats = run(metadata=meta, out=tmp_path / "out", options=load(_manifest(tmp_path, FRANCE_ONLY)), progress=False)
    out = pq.read_table(tmp_path / "out" / "candidates.parquet")
    # 100 (Paris, Tokyo, Tokyo) is excluded; 200 (Tokyo, Tokyo) is one candidate: its first row
    first_200 = "200 first" if order == "as listed" else "200 second"
    assert sorted(zip(out["photo_id"].to_pylist(), out["title"].to_pylist())) == [(200, first_200), (300, "300")]
    assert stats == {
        "rows_in": 11, "photos_in": 6,
        "duplicate_ids": {"photos": 4, "rows": 9, "examples": [100, 200, 500, 600]},
        # each photo once, for the first reason (in funnel order) that any of its rows meets
        "excluded": {"no_geotag": 1, "video": 1, "country:FRA": 2},
        "photos_out": 2, "rows_out": 2,
    }
    assert stats["photos_in"] == stats["photos_out"] + sum(stats["excluded"].values())
    assert json.loads((tmp_path / "out" / "stats.json").read_text()) == stats
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["candidates.parquet", "stats.json"]


def test_sample_counts_photos_and_never_takes_a_photo_excluded_elsewhere(tmp_path, monkeypatch):
    meta = tmp_path / "meta"
    # the second half repeats the first half's ids, each copy at another random place
    table, place, geotagged = write_metadata(meta, n=3000, parts=3, dup_ids=True)
    ids, marker = table["photo_id"].to_pylist(), table["marker"].to_numpy()
    row_ok = [geotagged[i] and marker[i] != 1 and place[i] not in UK_SIDE and place[i] not in UK_COAST
              and place[i] not in ("Las Vegas Strip", "Henderson") for i in range(len(ids))]
    photo_ok: dict[int, bool] = {}
    for pid, ok in zip(ids, row_ok):
        photo_ok[pid] = photo_ok.get(pid, True) and ok
    want = {pid for pid, ok in photo_ok.items() if ok}
    assert 0 < len(want) < sum(row_ok)  # some photos are kept on one row and excluded on another
    full = run(metadata=meta, out=tmp_path / "full", options=_recipe(tmp_path), progress=False)
    full_ids = pq.read_table(tmp_path / "full" / "candidates.parquet")["photo_id"].to_pylist()
    assert sorted(full_ids) == sorted(want) and full["photos_out"] == len(want)
    assert full["photos_in"] == len(photo_ok) == 1500 and full["rows_in"] == 3000
    assert full["duplicate_ids"]["photos"] == 1500 and full["duplicate_ids"]["rows"] == 3000
    recipe = _recipe(tmp_path, "  sample: {n: 200, seed: 5}\n")
    a = run(metadata=meta, out=tmp_path / "a", options=recipe, progress=False)
    ids_a = pq.read_table(tmp_path / "a" / "candidates.parquet")["photo_id"].to_pylist()
    assert len(ids_a) == len(set(ids_a)) == 200 == a["photos_out"] and set(ids_a) <= want
    assert a["excluded"]["sampled_out"] == len(want) - 200
    assert a["photos_in"] == a["photos_out"] + sum(a["excluded"].values())
    # the same bytes whatever the number of spill buckets; the same rows whatever the batch size
    monkeypatch.setattr(gf, "BUCKET_ROWS", 250)
    b = run(metadata=meta, out=tmp_path / "b", options=recipe, progress=False)
    for name in ("candidates.parquet", "stats.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    monkeypatch.setattr(gf, "BATCH_ROWS", 97)
    c = run(metadata=meta, out=tmp_path / "c", options=recipe, progress=False)
    assert pq.read_table(tmp_path / "c" / "candidates.parquet").equals(pq.read_table(tmp_path / "a" / "candidates.parquet"))
    assert a == b == c


# Places geofilter cannot write to -------------------------------------------------

def _unwritable_check(tmp_path, capsys):
    meta = tmp_path / "meta"
    write_metadata(meta, n=3000)
    m = str(_manifest(tmp_path, GOOD))
    capsys.readouterr()

    def check(out: Path, reason: str) -> None:
        rc = main(["geofilter", "--metadata", str(meta), "--manifest", m, "--out", str(out), "--no-progress"])
        err = capsys.readouterr().err
        assert rc == 1 and err == f"mining geofilter: error: {out}: {reason}\n", err

    return check


def test_unwritable_output_is_one_line_naming_the_path(tmp_path, capsys, monkeypatch):
    import errno

    check = _unwritable_check(tmp_path, capsys)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    check(blocker / "out", "Not a directory")
    check(blocker, "a file is in the way (a folder is needed here)")

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", no_space)
    monkeypatch.setattr(pq.ParquetWriter, "write_batch", no_space)
    check(tmp_path / "c", "No space left on device")
    assert not (tmp_path / "c").exists()  # no partial output, no scratch files, no folder


def test_read_only_folder_and_full_disk_for_real(tmp_path, capsys):
    from faults import full_disk, read_only_folder

    check = _unwritable_check(tmp_path, capsys)
    with read_only_folder(tmp_path / "ro") as ro:
        check(ro / "c", "Read-only file system" if os.geteuid() == 0 else "Permission denied")
    with full_disk(tmp_path / "full", size_kb=8) as full:  # the 3000 rows' photo-id spill is 39 KB
        check(full / "c", "No space left on device")
        assert list(full.iterdir()) == []


def test_the_same_metadata_twice_gives_the_same_candidates(tmp_path, monkeypatch):
    """Every row twice (a file ingested twice): the same candidates, in the same order."""
    once, twice = tmp_path / "once", tmp_path / "twice"
    write_metadata(once, n=2000, parts=2)
    twice.mkdir()
    for k, part in enumerate(sorted(once.glob("part-*.parquet")) * 2):
        (twice / f"part-{k:05d}.parquet").write_bytes(part.read_bytes())
    monkeypatch.setattr(gf, "BUCKET_ROWS", 700)  # 6 spill buckets
    recipe = _recipe(tmp_path)
    a = run(metadata=once, out=tmp_path / "a", options=recipe, progress=False)
    b = run(metadata=twice, out=tmp_path / "b", options=recipe, progress=False)
    assert pq.read_table(tmp_path / "b" / "candidates.parquet").equals(pq.read_table(tmp_path / "a" / "candidates.parquet"))
    assert b["rows_in"] == 4000 and b["photos_in"] == a["photos_in"] == 2000
    assert b["duplicate_ids"] == {"photos": 2000, "rows": 4000, "examples": list(range(1_000_000, 1_000_010))}
    assert (b["excluded"], b["photos_out"]) == (a["excluded"], a["photos_out"])
