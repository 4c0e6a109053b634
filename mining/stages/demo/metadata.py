"""YFCC100M-format metadata rows for the demo world (25-field `yfcc100m_dataset` layout).

Geotags are drawn from named anchor places whose side of every exclusion is known by
construction (city centres, towns a few km from a border, coastal towns, islands, open sea,
points at exact geodesic distances from the Las Vegas centre), so the truth about each row
is exact without needing the country polygons the geofilter uses.

The row formatter (`row_fields`) and the malformed rows (`malform`, each defect named by the
reject reason `mining ingest` gives for it) are the project's only ones: the tests' and
benchmarks' bulk rows (fixtures/yfcc_rows.py) are made with them.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import quote_plus

import numpy as np

# The exclusion recipe the demo metadata is made for (recorded in world.json; the demo
# manifest should use the same): R1M's UK + France + Las Vegas.
LAS_VEGAS = (36.1699, -115.1398)
LAS_VEGAS_RADIUS_KM = 40.0
EXCLUSION = {
    "countries": ["GBR", "FRA"],
    "include_dependencies": False,
    "areas": [{"name": "las-vegas", "center": [LAS_VEGAS[0], LAS_VEGAS[1]], "radius_km": LAS_VEGAS_RADIUS_KM}],
}

LICENSES = [  # YFCC100M's own names and URLs (Creative Commons 2.0 generic)
    ("Attribution License", "http://creativecommons.org/licenses/by/2.0/"),
    ("Attribution-ShareAlike License", "http://creativecommons.org/licenses/by-sa/2.0/"),
    ("Attribution-NoDerivs License", "http://creativecommons.org/licenses/by-nd/2.0/"),
    ("Attribution-NonCommercial License", "http://creativecommons.org/licenses/by-nc/2.0/"),
    ("Attribution-NonCommercial-ShareAlike License", "http://creativecommons.org/licenses/by-nc-sa/2.0/"),
    ("Attribution-NonCommercial-NoDerivs License", "http://creativecommons.org/licenses/by-nc-nd/2.0/"),
]
_LICENSE_WEIGHTS = np.array([0.16, 0.13, 0.05, 0.17, 0.33, 0.16])

DEVICES = ["Canon EOS 400D Digital", "NIKON D90", "Canon PowerShot SD450", "Apple iPhone 4", "SONY DSC-W55",
           "Panasonic DMC-FZ8", "FUJIFILM FinePix S5600", "OLYMPUS E-510", "NIKON D700", "Canon EOS 5D Mark II", ""]
NICKS = ["jhf", "MDG26", "Indigo Skies Photography", "marie & paul", "tom_k", "Ansel A.", "photo.geek",
         "Café Traveller", "ola", "J. Smith", "wanderlust!", "Kasia"]

# (name, lat, lon, jitter_km, inside an excluded place?, group). Border towns are ≥ 2 km
# from the border, coastal towns within a few hundred metres of the shore.
Anchor = tuple[str, float, float, float, bool, str]
ANCHORS: list[Anchor] = [
    # world cities (kept)
    *[(n, la, lo, 4.0, False, "city") for n, la, lo in [
        ("tokyo", 35.6762, 139.6503), ("new_york", 40.7128, -74.0060), ("berlin", 52.5200, 13.4050),
        ("madrid", 40.4168, -3.7038), ("rome", 41.9028, 12.4964), ("sydney", -33.8688, 151.2093),
        ("rio", -22.9068, -43.1729), ("cape_town", -33.9249, 18.4241), ("moscow", 55.7558, 37.6173),
        ("beijing", 39.9042, 116.4074), ("mumbai", 19.0760, 72.8777), ("cairo", 30.0444, 31.2357),
        ("toronto", 43.6532, -79.3832), ("mexico_city", 19.4326, -99.1332), ("buenos_aires", -34.6037, -58.3816),
        ("seoul", 37.5665, 126.9780), ("istanbul", 41.0082, 28.9784), ("amsterdam", 52.3676, 4.9041),
        ("san_francisco", 37.7749, -122.4194), ("chicago", 41.8781, -87.6298), ("dublin", 53.3498, -6.2603),
        ("prague", 50.0755, 14.4378), ("vienna", 48.2082, 16.3738), ("singapore", 1.3521, 103.8198),
        ("bangkok", 13.7563, 100.5018), ("nairobi", -1.2921, 36.8219), ("lima", -12.0464, -77.0428),
        ("stockholm", 59.3293, 18.0686), ("lisbon", 38.7223, -9.1393), ("athens", 37.9838, 23.7275),
        ("melbourne", -37.8136, 144.9631), ("seattle", 47.6062, -122.3321)]],
    # inside the UK and France, incl. overseas departments (excluded)
    *[(n, la, lo, 1.0, True, "excluded_country") for n, la, lo in [
        ("london", 51.5074, -0.1278), ("edinburgh", 55.9533, -3.1883), ("manchester", 53.4808, -2.2426),
        ("oxford", 51.7520, -1.2577), ("birmingham", 52.4862, -1.8904), ("paris", 48.8566, 2.3522),
        ("lyon", 45.7640, 4.8357), ("toulouse", 43.6047, 1.4442), ("bordeaux", 44.8378, -0.5792),
        ("saint_denis_reunion", -20.8789, 55.4481), ("cayenne", 4.9224, -52.3135)]],
    # both sides of the UK and French land borders
    *[(n, la, lo, 0.3, inside, "border") for n, la, lo, inside in [
        ("newry", 54.1751, -6.3402, True), ("derry", 54.9966, -7.3086, True), ("enniskillen", 54.3438, -7.6315, True),
        ("dundalk", 54.0090, -6.4049, False), ("letterkenny", 54.9503, -7.7337, False), ("monaghan", 54.2492, -6.9683, False),
        ("lille", 50.6292, 3.0573, True), ("kortrijk", 50.8280, 3.2649, False), ("tournai", 50.6056, 3.3878, False),
        ("strasbourg", 48.5734, 7.7521, True), ("kehl_east", 48.5700, 7.8300, False), ("offenburg", 48.4735, 7.9498, False),
        ("thonon", 46.3705, 6.4793, True), ("geneva", 46.2044, 6.1432, False), ("mulhouse", 47.7508, 7.3359, True),
        ("basel", 47.5596, 7.5886, False), ("perpignan", 42.6887, 2.8948, True), ("figueres", 42.2666, 2.9612, False),
        ("san_sebastian", 43.3183, -1.9812, False), ("ventimiglia", 43.7906, 7.6082, False)]],
    # coasts (inside thanks to the shoreline buffer) and coasts of kept neighbours
    *[(n, la, lo, 0.2, inside, "coast") for n, la, lo, inside in [
        ("brighton_pier", 50.8160, -0.1364, True), ("dover", 51.1279, 1.3134, True), ("st_ives", 50.2110, -5.4800, True),
        ("scarborough", 54.2831, -0.3998, True), ("calais", 50.9513, 1.8587, True), ("biarritz", 43.4832, -1.5586, True),
        ("marseille", 43.2965, 5.3698, True), ("nice", 43.6950, 7.2650, True), ("ostend", 51.2194, 2.9196, False),
        ("dun_laoghaire", 53.2940, -6.1340, False), ("zeebrugge", 51.3300, 3.2000, False)]],
    # islands
    *[(n, la, lo, 0.5, inside, "island") for n, la, lo, inside in [
        ("isle_of_wight", 50.7010, -1.2883, True), ("ajaccio_corsica", 41.9192, 8.7386, True),
        ("kirkwall_orkney", 58.9810, -2.9605, True), ("fort_de_france", 14.6161, -61.0588, True),
        ("st_helier_jersey", 49.1868, -2.1070, False), ("douglas_isle_of_man", 54.1523, -4.4861, False),
        ("palma_mallorca", 39.5696, 2.6502, False), ("reykjavik", 64.1466, -21.9426, False),
        ("honolulu", 21.3069, -157.8583, False), ("palermo", 38.1157, 13.3615, False)]],
    # open sea (kept: no country)
    *[(n, la, lo, 30.0, False, "sea") for n, la, lo in [
        ("mid_atlantic", 30.0, -40.0), ("pacific", 0.0, -150.0), ("north_sea", 56.0, 3.0),
        ("mid_channel", 50.15, -1.6), ("mediterranean", 38.0, 5.0), ("indian_ocean", -20.0, 80.0)]],
]
_GROUP_WEIGHTS = {"city": 0.42, "excluded_country": 0.14, "border": 0.12, "coast": 0.08, "island": 0.07,
                  "sea": 0.05, "vegas": 0.12}

_TITLES = {
    "building": ["Old town", "Cathedral", "Church front", "Museum", "Façade", "City hall", "Architecture",
                 "Walking tour, day 2", "The old library", "Main square"],
    "landscape": ["Mountains", "Hiking", "View from the top!", "Valley", "Sunset over the hills"],
    "seascape": ["Beach", "Sea & sky", "Holiday 2009", "Coast", "Waves"],
    "street": ["Street", "Downtown", "Rush hour", "Our street", "Night out"],
    "interior": ["Living room", "Kitchen", "The new flat", "Hotel room", "Office"],
    "objects": ["Breakfast", "Still life", "My new toy", "Dinner", "Coffee"],
    "people": ["Friends", "Party", "Family", "Us", "Wedding"],
    "forest": ["Forest", "Park", "Trees", "Autumn walk", "Garden"],
}
_TAGS = {
    "building": ["architecture", "building", "city", "travel", "church", "old town", "façade", "europe"],
    "landscape": ["landscape", "mountains", "nature", "hiking", "sky"],
    "seascape": ["sea", "beach", "holiday", "summer", "water"],
    "street": ["street", "city", "urban", "cars", "people"],
    "interior": ["home", "interior", "room", "design"],
    "objects": ["food", "macro", "still life", "coffee"],
    "people": ["friends", "family", "party", "portrait"],
    "forest": ["forest", "trees", "park", "autumn", "green"],
}


@dataclass(frozen=True)
class Place:
    name: str
    group: str
    lat: float
    lon: float
    excluded: bool


def _offset(lat: float, lon: float, km: float, bearing: float) -> tuple[float, float]:
    """Point at `km` along `bearing` (geodesic, WGS-84) — exact, so radius tests are meaningful."""
    from geopy.distance import geodesic

    p = geodesic(kilometers=km).destination((lat, lon), math.degrees(bearing))
    return p.latitude, p.longitude


def sample_place(rng: np.random.Generator) -> Place:
    """A geotag with its exclusion truth: pick a group, an anchor, and jitter inside its safe radius."""
    groups = list(_GROUP_WEIGHTS)
    g = groups[int(rng.choice(len(groups), p=np.array(list(_GROUP_WEIGHTS.values())) / sum(_GROUP_WEIGHTS.values())))]
    if g == "vegas":
        r = LAS_VEGAS_RADIUS_KM
        band = rng.random()
        if band < 0.5:
            km, name = rng.uniform(0, r * 0.9), "las_vegas"
        elif band < 0.75:
            km, name = rng.uniform(r - 1.0, r - 0.2), "las_vegas_edge_in"
        elif band < 0.9:
            km, name = rng.uniform(r + 0.2, r + 1.0), "las_vegas_edge_out"
        else:
            km, name = rng.uniform(r * 1.3, r * 3), "nevada"
        lat, lon = _offset(*LAS_VEGAS, km, rng.uniform(0, 2 * math.pi))
        return Place(name, g, round(lat, 6), round(lon, 6), km < r)
    cands = [a for a in ANCHORS if a[5] == g]
    name, lat, lon, jit, inside, _ = cands[int(rng.integers(len(cands)))]
    if jit > 0:
        lat, lon = _offset(lat, lon, rng.uniform(0, jit), rng.uniform(0, 2 * math.pi))
    return Place(name, g, round(lat, 6), round(lon, 6), inside)


@lru_cache(maxsize=4096)  # every encoded text comes from the small vocabularies above
def _enc(text: str) -> str:
    return quote_plus(text, safe="")


def _hex(rng: np.random.Generator, n: int) -> str:
    return "".join("0123456789abcdef"[int(i)] for i in rng.integers(0, 16, n))


@dataclass(frozen=True)
class PhotoRecord:
    """One metadata row before formatting (what the server and truth need as well)."""

    line: int
    photo_id: int
    server: int
    farm: int
    secret: str
    secret_original: str
    extension: str
    marker: int  # 0 photo, 1 video
    place: Place | None
    theme: str  # title/tag vocabulary: building, landscape, ...


def make_record(rng: np.random.Generator, line: int, photo_id: int, place: Place | None, theme: str,
                video: bool) -> PhotoRecord:
    secret = _hex(rng, 10)
    secret_o = secret if rng.random() < 0.3 else _hex(rng, 10)
    ext = "mp4" if video else ("png" if rng.random() < 0.03 else "jpg")
    return PhotoRecord(line, photo_id, int(rng.integers(1, 9999)), int(rng.integers(1, 10)), secret, secret_o,
                       ext, int(video), place, theme)


JUNK_DATE = "4501-01-01 00:00:00.0"  # YFCC100M's placeholder for an unknown date taken
COMMA_TAG = "b&w, film"  # a tag containing a comma: encoded as %2C, not split
MACHINE_TAGS = "exif:iso_speed=200,exif:flash=false"


def description(title: str) -> str:
    return f"{title}, taken with friends.\nMore at my page & blog!"


def place_tag(place: Place) -> str:
    return place.name.replace("_", " ")


class RowText(NamedTuple):
    """What a row holds beyond its PhotoRecord, as drawn (text not yet form-encoded)."""

    photo_hash: str
    nsid: str
    nickname: str
    taken: str
    uploaded: int
    device: str
    title: str
    description: str
    tags: list[str]
    machine_tags: str
    license: int  # index into LICENSES
    accuracy: str


def format_row(rng: np.random.Generator, rec: PhotoRecord, junk_date: bool = False) -> list[str]:
    """The 25 fields of a YFCC100M row (text form-URL-encoded, tags comma-joined after encoding)."""
    nsid = f"{int(rng.integers(10_000_000, 99_999_999))}@N0{int(rng.integers(0, 9))}"
    year = int(rng.integers(2004, 2015))
    taken = (f"{year}-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 29)):02d} "
             f"{int(rng.integers(0, 24)):02d}:{int(rng.integers(0, 60)):02d}:{int(rng.integers(0, 60)):02d}.0")
    uploaded = int(1_100_000_000 + (year - 2004) * 31_536_000 + rng.integers(0, 40_000_000))
    if junk_date:
        taken = JUNK_DATE
    titles, tags = _TITLES[rec.theme], _TAGS[rec.theme]
    title = titles[int(rng.integers(len(titles)))]
    desc = "" if rng.random() < 0.5 else description(title)
    chosen = sorted({tags[int(i)] for i in rng.integers(0, len(tags), int(rng.integers(0, 5)))})
    if rec.place is not None and rng.random() < 0.5:
        chosen.append(place_tag(rec.place))
    if rng.random() < 0.1:
        chosen.append(COMMA_TAG)
    machine = "" if rng.random() < 0.9 else MACHINE_TAGS
    lic = int(rng.choice(len(LICENSES), p=_LICENSE_WEIGHTS / _LICENSE_WEIGHTS.sum()))
    if rec.place is None:
        acc = ""
    else:
        acc = str(int(rng.integers(1, 6)) if rec.place.group == "sea" else int(rng.integers(11, 17)))
    _hex(rng, 32)  # a draw no field uses, kept: every field after it depends on the generator's position
    return row_fields(rec, RowText(tsv_photo_hash(rec), nsid, NICKS[int(rng.integers(len(NICKS)))], taken, uploaded,
                                   DEVICES[int(rng.integers(len(DEVICES)))], title, desc, chosen, machine, lic, acc))


def download_url(rec: PhotoRecord) -> str:
    """The row's download URL (YFCC's 500 px Flickr URL); YFCC's photo hash is derived from it."""
    return f"http://farm{rec.farm}.staticflickr.com/{rec.server}/{rec.photo_id}_{rec.secret}.jpg"


def tsv_photo_hash(rec: PhotoRecord) -> str:
    """The demo's 25-field photo hash: the 32-character (zero-padded) MD5 of the download URL,
    i.e. the mirror's key (`mining.photos.flickr.yfcc_hash`) written with leading zeros. Whether the
    real file writes it so is unverified (docs/references.md); `mining ingest` counts it."""
    return hashlib.md5(download_url(rec).encode("utf-8")).hexdigest()


def row_fields(rec: PhotoRecord, t: RowText) -> list[str]:
    """The one YFCC100M row formatter (the demo world's rows and the tests' bulk rows)."""
    if rec.place is None:
        lon = lat = ""
    else:
        lon, lat = f"{rec.place.lon:.6f}", f"{rec.place.lat:.6f}"
    lic_name, lic_url = LICENSES[t.license]
    pid = rec.photo_id
    return [
        str(rec.line), str(pid), t.photo_hash, t.nsid, _enc(t.nickname), t.taken,
        str(t.uploaded), _enc(t.device), _enc(t.title), _enc(t.description),
        ",".join(_enc(tag) for tag in t.tags), t.machine_tags, lon, lat, t.accuracy,
        f"http://www.flickr.com/photos/{t.nsid}/{pid}/",
        download_url(rec),
        _enc(lic_name), lic_url, str(rec.server), str(rec.farm), rec.secret, rec.secret_original,
        rec.extension, str(rec.marker),
    ]


# Malformed rows: each defect named by the reject reason `mining ingest` gives for it (its
# REASONS), then by how the row is damaged where a reason has several ways.
MALFORMED: dict[str, tuple[str, ...]] = {
    "wrong_field_count": ("too_few_fields", "too_many_fields"),
    "bad_photo_id": ("bad_photo_id",),
    "bad_coordinates": ("bad_longitude", "bad_latitude"),
    "latitude_out_of_range": ("latitude_out_of_range",),
    "longitude_out_of_range": ("longitude_out_of_range",),
    "bad_encoding": ("bad_escape", "invalid_utf8"),
    "bad_number": ("bad_date_uploaded",),
}
# The demo world's malformed rows, cycled through in this order (world.json lists the defects).
MALFORMED_KINDS: tuple[tuple[str, str], ...] = (
    ("wrong_field_count", "too_few_fields"), ("wrong_field_count", "too_many_fields"),
    ("bad_photo_id", "bad_photo_id"), ("bad_coordinates", "bad_longitude"), ("bad_number", "bad_date_uploaded"))
_PHOTO_ID, _UPLOADED, _TITLE, _DESCRIPTION, _LON, _LAT = 1, 6, 8, 9, 12, 13  # 25-field layout


def _out_of_range(limit: float, far: float, rng: np.random.Generator | None) -> str:
    """A coordinate beyond ±`limit` (at most `far` away from 0)."""
    if rng is None:
        return f"{limit + 1.5:.4f}"
    return f"{int(rng.choice([-1, 1])) * rng.uniform(limit + 0.001, far):.4f}"


def malform(fields: list[str], reason: str, defect: str, rng: np.random.Generator | None = None) -> list[str]:
    """Damage a 25-field row the way real dumps are damaged (one defect per row) so that ingest
    rejects it for `reason`. `rng` varies the out-of-range values (fixed ones without it)."""
    if defect not in MALFORMED.get(reason, ()):
        raise ValueError(f"no defect {defect!r} for reason {reason!r}")
    f = list(fields)
    if defect == "too_few_fields":
        del f[_DESCRIPTION]
    elif defect == "too_many_fields":
        f.insert(_DESCRIPTION, "stray\ttab")
    elif defect == "bad_photo_id":
        f[_PHOTO_ID] = f[_PHOTO_ID][:3] + "x" + f[_PHOTO_ID][3:]
    elif defect == "bad_longitude":
        f[_LON] = "12.3.4"
    elif defect == "bad_latitude":
        f[_LON], f[_LAT] = "12.5", "north"
    elif defect == "latitude_out_of_range":
        f[_LON], f[_LAT] = "10.0", _out_of_range(90, 400, rng)
    elif defect == "longitude_out_of_range":
        f[_LON], f[_LAT] = _out_of_range(180, 900, rng), "10.0"
    elif defect == "bad_escape":
        f[_TITLE] += "+%G7"  # not a %-escape
    elif defect == "invalid_utf8":
        f[_TITLE] += "+%FF%FE"  # decodes to bytes that are not UTF-8
    else:  # bad_date_uploaded
        f[_UPLOADED] = "yesterday"
    return f
