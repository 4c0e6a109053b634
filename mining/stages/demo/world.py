"""Plan and build the demo world: landmarks + ground truth, candidates + metadata + truth.

A build is a plan (a list of independent render tasks, each with its own derived seed) then
a parallel map over it; so the bytes of every file depend only on (preset, seed), never on
the number of workers or the order in which tasks finish.
"""

from __future__ import annotations

import functools
import logging
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mining.files import atomic
from mining.errors import UserError
from mining.files.names import IMAGE_INDEX, TRUTH, WORLD
from mining.photos.flickr import yfcc_hash

from . import metadata as md
from .facade import FAMILIES, Facade, render_facade
from .paint import VIEW_H, VIEW_W, encode_jpeg
from .scenes import SCENES, render_scene
from .views import render_view, view_params
import multiprocessing as mp
import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from mining.photos import imageindex
from mining.datasets.benchmarks import demo_names, qualify
from mining.settings.layout import key_relpath
from mining.settings.options import DemoOptions
from mining.console.progress import bar

log = logging.getLogger(__name__)

PRESETS: dict[str, dict[str, int]] = {
    # micro: for unit tests only (fewer than the minimums for tiny)
    "micro": dict(landmarks=3, queries=2, easy=3, hard=2, junk=1, db_negatives=6, candidates=24),
    "tiny": dict(landmarks=5, queries=2, easy=5, hard=4, junk=2, db_negatives=20, candidates=300),
    "small": dict(landmarks=11, queries=5, easy=12, hard=10, junk=4, db_negatives=200, candidates=5000),
    "medium": dict(landmarks=15, queries=5, easy=15, hard=12, junk=5, db_negatives=1000, candidates=50000),
    # city100: many landmarks, few candidates (review that scales with the landmarks; docs/big-city.md)
    "city100": dict(landmarks=100, queries=5, easy=3, hard=2, junk=1, db_negatives=100, candidates=600),
}
SHARES = {"landmark": 0.05, "hard_negative": 0.20}  # the rest: unrelated scenes
SMALL_SHARE = 0.04  # candidate images stored below 1024 px (the downloader must reject them)
NO_GEOTAG_SHARE, VIDEO_SHARE, JUNK_DATE_SHARE = 0.10, 0.03, 0.01
DEFAULT_FAULTS = {
    "not_found": 0.02, "gone": 0.01, "forbidden": 0.01, "placeholder": 0.02, "throttle": 0.02,
    "server_error": 0.02, "slow": 0.01, "stall": 0.0, "truncated": 0.01, "wrong_type": 0.01, "small": 0.0,
}
_NAMES = ["aldgate", "belmont", "carrow", "dunmore", "elmsworth", "fairhaven", "glenrock", "harwick", "islay",
          "juniper", "kingsford", "lindale", "marlow", "northcote", "oakridge", "penrose", "rosslyn", "stanmore"]
_NOUNS = {"gothic": ["cathedral", "abbey", "minster", "chapel"], "classical": ["museum", "library", "palace", "opera"],
          "modern": ["tower", "gallery", "centre", "station"]}
_TAG = {"facade": 1, "view": 2, "negfacade": 3, "scene": 4, "meta": 5, "plan": 6, "dup": 7}
# Planted near-duplicates (mining.stages.neardup.stage is measured on them): bursts (one candidate and
# BURST_COPIES near-copies of it: the same scene re-shot seconds apart) and re-uploads (a
# candidate that is a cropped, re-encoded copy of a landmark query or database image).
BURSTS_PER, BURST_COPIES, REUPLOADS_PER = 60, 2, 100  # one burst per 60 candidates, one re-upload per 100
# A world with several cities (benchmarks): city k's landmark buildings are subjects k·CITY_STRIDE + i
# (below the database negatives' 10,000) and its render keys start at k·KEY_STRIDE.
CITY_STRIDE, KEY_STRIDE, MAX_CITIES = 1000, 10_000_000, 4


def _rng(seed: int, *keys: int) -> np.random.Generator:
    """Independent stream per item: same (seed, keys) → same numbers, whatever else is built."""
    return np.random.default_rng([seed, *keys])


@dataclass(frozen=True)
class Landmark:
    name: str
    family: str
    index: int


@dataclass(frozen=True)
class Task:
    """One image to render: a landmark view, another building's view, or an unrelated scene."""

    out: str  # path relative to the world root
    kind: str  # "landmark", "facade", "scene"
    label: str  # query/easy/hard/junk for views; scene kind for scenes
    subject: int  # landmark index or façade seed
    family: str
    key: int  # item seed key
    small: bool = False
    source: str = ""  # kind "copy": the image (relative to the root) this one is a near-copy of


@functools.lru_cache(maxsize=4)
def _facade(seed: int, tag: int, subject: int, family: str) -> Facade:
    return render_facade(family, _rng(seed, _TAG["facade"], tag, subject))


def render_task(seed: int, task: Task) -> tuple[bytes, Any, str]:
    """Render one task; returns (JPEG bytes, bbox or None, the view's problem name)."""
    import cv2

    rng = _rng(seed, _TAG["view"], task.key)
    if task.kind == "scene":
        img, bbox, problem = render_scene(task.label, rng), None, task.label
    else:
        fac = _facade(seed, 0 if task.kind == "landmark" else 1, task.subject, task.family)
        params, problem = view_params(task.label, rng)
        img, bbox = render_view(fac, params, rng)
    if task.small:  # a share of photos only exists below 1024 px
        h, w = img.shape[:2]
        s = float(rng.uniform(0.45, 0.8))
        img = cv2.resize(img, (int(w * s), int(h * s)), interpolation=cv2.INTER_AREA)
    return encode_jpeg(img), bbox, problem


def _worker_init() -> None:
    import cv2

    cv2.setNumThreads(1)


def near_copy(data: bytes, seed: int, task: Task) -> bytes:
    """A near-copy of a JPEG: label "burst" = the same scene a moment later (a 2-6 % shift,
    a little exposure change); "reupload" = cropped by 5-15 %, scaled back to at least 1024 px,
    colour-shifted and re-encoded at a lower quality."""
    import cv2

    rng = _rng(seed, _TAG["dup"], task.key)
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    h, w = img.shape[:2]
    lo, hi = (0.02, 0.06) if task.label == "burst" else (0.05, 0.15)
    cw, ch = int(w * (1 - rng.uniform(lo, hi))), int(h * (1 - rng.uniform(lo, hi)))
    x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
    crop = cv2.resize(img[y0:y0 + ch, x0:x0 + cw], (w, h), interpolation=cv2.INTER_LINEAR)
    gain = rng.uniform(0.92, 1.08, size=3 if task.label == "reupload" else 1)
    out = np.clip(crop.astype(np.float32) * gain + rng.uniform(-8, 8), 0, 255).astype(np.uint8)
    return encode_jpeg(out, quality=int(rng.integers(70, 86)) if task.label == "reupload" else 90)


def _run_task(args: tuple[int, str, Task, bool]) -> tuple[str, Any, str, bool]:
    seed, root, task, resume = args
    path = Path(root) / task.out
    if resume and path.exists():
        return task.out, None, "", False
    if task.kind == "copy":
        atomic.write_bytes(path, near_copy((Path(root) / task.source).read_bytes(), seed, task))
        return task.out, None, task.label, True
    data, bbox, problem = render_task(seed, task)
    atomic.write_bytes(path, data)
    return task.out, bbox, problem, True


def _plant_near_duplicates(tasks: list[Task], truth: dict[str, list[Any]], qimlist: list[str], gnd: list[dict],
                           imlist: list[str], lms: list[Landmark], seed: int, rel: str = "landmarks",
                           prefix: str = "") -> dict[str, int]:
    """Turn some candidates (full-size, outside the excluded regions, not landmark views)
    into planted near-copies, in place: bursts copy another candidate (truth `copy_of` =
    "photo:<id>", same kind); re-uploads copy a landmark query or Easy database image (kind
    "landmark", view "reupload", `copy_of` = its name). Counts and metadata rows stay as they
    were; a separate random stream leaves the rest of the world unchanged."""
    n = len(tasks)
    eligible = [i for i, t in enumerate(tasks) if not t.small and not truth["in_excluded_region"][i]
                and truth["kind"][i] != "landmark"]
    n_burst, n_re = max(1, n // BURSTS_PER), max(1, n // REUPLOADS_PER)
    if len(eligible) < n_burst * (1 + BURST_COPIES) + n_re:
        return {"bursts": 0, "burst_copies": 0, "reuploads": 0}
    slots = iter(_rng(seed, _TAG["dup"], 0).permutation(eligible).tolist())

    def copy(i: int, label: str, source: str) -> None:
        tasks[i] = Task(tasks[i].out, "copy", label, 0, tasks[i].family, tasks[i].key, False, source)

    for _ in range(n_burst):
        src = next(slots)
        for _ in range(BURST_COPIES):
            i = next(slots)
            copy(i, "burst", tasks[src].out)
            for c in ("kind", "landmark", "family"):
                truth[c][i] = truth[c][src]
            truth["view"][i], truth["copy_of"][i] = "burst", f"photo:{truth['photo_id'][src]}"
    for r in range(n_re):
        lm = lms[r % len(lms)]
        q = qimlist.index(f"{lm.name}_q1")
        name = qimlist[q] if r % 2 == 0 else imlist[gnd[q]["easy"][r // 2 % len(gnd[q]["easy"])]]
        i = next(slots)
        copy(i, "reupload", f"{rel}/jpg/{name}.jpg")
        truth["kind"][i], truth["landmark"][i], truth["family"][i] = "landmark", prefix + lm.name, lm.family
        truth["view"][i], truth["copy_of"][i] = "reupload", prefix + name
    return {"bursts": n_burst, "burst_copies": n_burst * BURST_COPIES, "reuploads": n_re}


def _city_keys(city: int) -> tuple[int, ...]:
    """Extra RNG keys of city k of a world with several (none for the first: its city is the
    one-city world's, byte for byte)."""
    return (city,) if city else ()


def _landmarks(cfg: dict[str, int], seed: int, city: int = 0) -> list[Landmark]:
    """A city's landmarks; city k's indices (the rendered buildings) start at k·CITY_STRIDE."""
    rng = _rng(seed, _TAG["plan"], 0, *_city_keys(city))
    order = rng.permutation(len(_NAMES))
    out = []
    for i in range(cfg["landmarks"]):
        fam = FAMILIES[i % len(FAMILIES)]
        nouns = _NOUNS[fam]
        name = _NAMES[int(order[i % len(_NAMES)])] + (str(i // len(_NAMES) + 1) if i >= len(_NAMES) else "")
        out.append(Landmark(f"{name}_{nouns[int(rng.integers(len(nouns)))]}", fam, city * CITY_STRIDE + i))
    return out


def _map(tasks: list[Task], seed: int, root: Path, workers: int, resume: bool, desc: str) -> dict[str, tuple[Any, str]]:
    """Render tasks in parallel (or inline for one worker), with a progress bar."""
    args = [(seed, str(root), t, resume) for t in tasks]
    results: dict[str, tuple[Any, str]] = {}
    if workers <= 1:
        it = map(_run_task, args)
        for out, bbox, problem, _ in bar(it, total=len(args), desc=desc, unit="img", leave=False):
            results[out] = (bbox, problem)
        return results

    ctx = mp.get_context("spawn")  # fork after OpenCV has started its threads can deadlock
    with ctx.Pool(workers, initializer=_worker_init) as pool:
        it = pool.imap(_run_task, args, chunksize=8)
        for out, bbox, problem, _ in bar(it, total=len(args), desc=desc, unit="img", leave=False):
            results[out] = (bbox, problem)
    return results


def _build_city(cfg: dict[str, int], seed: int, city: int, root: Path, rel: str, city_name: str,
                workers: int) -> tuple[list[str], list[dict], list[str], list[Landmark]]:
    """One city's landmark dataset (queries, labelled views, database negatives) under ROOT/REL:
    its images in REL/jpg/ and REL/gnd_<name>.pkl. Returns (qimlist, gnd, imlist, landmarks)."""
    lms = _landmarks(cfg, seed, city)
    prng = _rng(seed, _TAG["plan"], 1, *_city_keys(city))
    key = iter(range(city * KEY_STRIDE, 10**9))
    lm_tasks: list[Task] = []
    db_entries: list[tuple[str, str, str | None]] = []  # (name, label, landmark)
    counters = {lm.name: iter(prng.permutation(900_000)[:200] + 1) for lm in lms}
    for lm in lms:
        for q in range(cfg["queries"]):
            lm_tasks.append(Task(f"{rel}/jpg/{lm.name}_q{q + 1}.jpg", "landmark", "query", lm.index, lm.family, next(key)))
        for label in ("easy", "hard", "junk"):
            for _ in range(cfg[label]):
                name = f"{lm.name}_{int(next(counters[lm.name])):06d}"
                lm_tasks.append(Task(f"{rel}/jpg/{name}.jpg", "landmark", label, lm.index, lm.family, next(key)))
                db_entries.append((name, label, lm.name))
    neg_ids = prng.permutation(900_000)[: cfg["db_negatives"]] + 1
    for j, nid in enumerate(neg_ids):
        name = f"other_{int(nid):06d}"
        if j % 2 == 0:
            fam = FAMILIES[j // 2 % 3]
            subject = 10_000 + city * CITY_STRIDE + j  # another city's negatives are other buildings
            lm_tasks.append(Task(f"{rel}/jpg/{name}.jpg", "facade", "easy", subject, fam, next(key)))
        else:
            kind = SCENES[j // 2 % len(SCENES)]
            lm_tasks.append(Task(f"{rel}/jpg/{name}.jpg", "scene", kind, 0, kind, next(key)))
        db_entries.append((name, "negative", None))
    results = _map(lm_tasks, seed, root, workers, resume=False, desc="landmarks")
    imlist = sorted(name for name, _, _ in db_entries)
    index = {n: i for i, n in enumerate(imlist)}
    qimlist, gnd = [], []
    for lm in lms:
        by_label = {lab: sorted(index[n] for n, l2, owner in db_entries if owner == lm.name and l2 == lab)
                    for lab in ("easy", "hard", "junk")}
        for q in range(cfg["queries"]):
            name = f"{lm.name}_q{q + 1}"
            bbox = results[f"{rel}/jpg/{name}.jpg"][0]
            qimlist.append(name)
            gnd.append({"bbx": [round(float(v), 1) for v in bbox], "easy": by_label["easy"], "hard": by_label["hard"],
                        "junk": by_label["junk"], "landmark": lm.name})
    atomic.write_bytes(root / rel / f"gnd_{city_name}.pkl",
                       pickle.dumps({"imlist": imlist, "qimlist": qimlist, "gnd": gnd}, protocol=4))
    return qimlist, gnd, imlist, lms


def run_build(*, out: str | os.PathLike[str], options: DemoOptions, workers: int = 1,
              resume: bool = True) -> dict[str, Any]:
    """Write the whole world under `out` (its settings: the preset, the seed and the number of
    benchmarks; the world reads no file); returns the world.json content. `options.benchmarks`
    > 1: as many landmark benchmarks (landmarks/<name>/gnd_<name>.pkl,
    `mining.datasets.benchmarks.demo_names`; the first is the one-city world's city) and one pool of
    candidates showing any of them. `workers`: render processes (the bytes do not depend on it);
    `resume`: keep the candidate images a previous build left."""
    _check_options(options)
    cfg = PRESETS[options.preset]
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    names = demo_names(options.benchmarks)
    several = options.benchmarks > 1
    rels = ["landmarks/" + n if several else "landmarks" for n in names]
    built = [_build_city(cfg, options.seed, k, root, rels[k], names[k], workers) for k in range(options.benchmarks)]
    lms = [lm for _, _, _, city_lms in built for lm in city_lms]  # a candidate may show any city's landmark
    lm_label = {lm.index: qualify(names[k], lm.name, several) for k, b in enumerate(built) for lm in b[3]}
    cand = _draw_candidates(cfg, options.seed, lms, lm_label)
    atomic.write_text(root / "metadata" / "yfcc100m_dataset", "\n".join(cand.rows) + "\n")
    # re-uploads copy the first city's landmark images
    planted = _plant_near_duplicates(cand.tasks, cand.truth, *built[0], options.seed, rels[0],
                                     f"{names[0]}/" if several else "")
    # Sort candidate tasks by kind so façade caches hit inside each worker; copies after their sources.
    cand.tasks.sort(key=lambda t: (t.kind, t.subject, t.out))
    _map([t for t in cand.tasks if t.kind != "copy"], options.seed, root, workers, resume=resume, desc="candidates")
    _map([t for t in cand.tasks if t.kind == "copy"], options.seed, root, 1, resume=resume,
         desc="near-copies")  # cheap: inline
    _write_tables(root, cand)
    world = _world(options, built, lms, lm_label, cand, planted)
    from .preview import write_preview

    if several:  # each city's landmark dataset (`mining.datasets.benchmarks.demo_names`)
        world["benchmarks"] = [{"name": n, "gnd": f"{r}/gnd_{n}.pkl"} for n, r in zip(names, rels)]
        world["files"]["landmarks"] = world["benchmarks"][0]["gnd"]
    write_preview(root, root / "preview.png", world["files"]["landmarks"])
    atomic.write_json(root / WORLD, world)
    return world


def _check_options(options: DemoOptions) -> None:
    if options.preset not in PRESETS:
        raise UserError(f"unknown preset '{options.preset}' (choose from {', '.join(PRESETS)})")
    if options.seed < 0:
        raise UserError("--seed must be a non-negative integer")
    if not 1 <= options.benchmarks <= MAX_CITIES:
        raise UserError(f"--benchmarks must be 1 to {MAX_CITIES}")


_TRUTH = ("photo_id", "kind", "landmark", "family", "in_excluded_region", "place", "view", "copy_of")
_INDEX = ("photo_id", "server", "farm", "secret", "secret_original", "extension", "photo_hash")


@dataclass
class _Candidates:
    """The candidates as drawn: their metadata rows (in file order), render tasks, truth and
    image index (one entry per candidate image), and how many rows of each other kind."""

    images: int
    nogeo: int
    video: int
    malformed: int
    rows: list[str] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    truth: dict[str, list[Any]] = field(default_factory=lambda: {c: [] for c in _TRUTH})
    index: dict[str, list[Any]] = field(default_factory=lambda: {c: [] for c in _INDEX})

    def add_image(self, task: Task, truth: tuple[Any, ...], rec: md.PhotoRecord) -> None:
        self.tasks.append(task)
        for c, v in zip(_TRUTH, truth):
            self.truth[c].append(v)
        for c, v in zip(_INDEX, (truth[0], rec.server, rec.farm, rec.secret, rec.secret_original, rec.extension,
                                 yfcc_hash(md.download_url(rec)))):
            self.index[c].append(v)


def _draw_candidates(cfg: dict[str, int], seed: int, lms: list[Landmark], lm_label: dict[int, str]) -> _Candidates:
    """The candidates' photo ids, kinds and row order (one seeded draw), then each row and
    candidate image from its own seed."""
    mrng = _rng(seed, _TAG["meta"], 0)
    n_img = cfg["candidates"]
    n_nogeo = max(2, int(round(n_img * NO_GEOTAG_SHARE)))
    n_video = max(2, int(round(n_img * VIDEO_SHARE)))
    cand = _Candidates(n_img, n_nogeo, n_video, max(5, int(round((n_img + n_nogeo + n_video) * 0.01))))
    ids: set[int] = set()
    while len(ids) < n_img + n_nogeo + n_video + cand.malformed:
        ids.add(int(mrng.integers(1_000_000, 12_000_000_000)))
    photo_ids = [int(i) for i in mrng.permutation(sorted(ids))]
    kinds = mrng.choice(["landmark", "hard_negative", "unrelated"], size=n_img,
                        p=[SHARES["landmark"], SHARES["hard_negative"], 1 - sum(SHARES.values())])
    forced = mrng.choice(n_img, size=min(n_img, len(lms)), replace=False)
    kinds[forced] = "landmark"  # every landmark has at least one image the review must catch
    roles = (["image"] * n_img + ["nogeo"] * n_nogeo + ["video"] * n_video + ["malformed"] * cand.malformed)
    order = mrng.permutation(len(roles))
    img_i = malformed_i = 0
    lm_seen: set[int] = set()
    for line, k in enumerate(order):
        role, pid = roles[int(k)], photo_ids[int(k)]
        rrng = _rng(seed, _TAG["meta"], 1, pid % (2**31), pid // (2**31))
        place = None if role == "nogeo" else md.sample_place(rrng)
        kind = str(kinds[img_i]) if role == "image" else "unrelated"
        if role == "image" and kind == "landmark" and place is not None and place.excluded and len(lm_seen) < len(lms):
            place = md.Place("berlin", "city", 52.52, 13.405, False)  # every landmark needs a catchable image
        theme = ("building" if kind != "unrelated" else SCENES[int(rrng.integers(len(SCENES)))])
        rec = md.make_record(rrng, line, pid, place, theme if theme in md._TITLES else "building", role == "video")
        fields = md.format_row(rrng, rec, junk_date=bool(rrng.random() < JUNK_DATE_SHARE))
        if role == "malformed":
            fields = md.malform(fields, *md.MALFORMED_KINDS[malformed_i % len(md.MALFORMED_KINDS)])
            malformed_i += 1
        cand.rows.append("\t".join(fields))
        if role != "image":
            continue
        img_i += 1
        task, lname, fam = _candidate_task(kind, theme, pid, img_i, rrng, lms, lm_seen, lm_label)
        cand.add_image(task, (pid, kind, lname, fam, bool(place is not None and place.excluded),
                              place.name if place else None, task.label, None), rec)
    return cand


def _candidate_task(kind: str, theme: str, pid: int, img_i: int, rrng: np.random.Generator, lms: list[Landmark],
                    lm_seen: set[int], lm_label: dict[int, str]) -> tuple[Task, str | None, str]:
    """A candidate image's render task, landmark label (None: none shown) and family; a
    landmark image shows each landmark in turn before any at random."""
    if kind == "landmark":
        lm = lms[len(lm_seen) % len(lms)] if len(lm_seen) < len(lms) else lms[int(rrng.integers(len(lms)))]
        lm_seen.add(lm.index)
        label = "easy" if rrng.random() < 0.6 else "hard"
        task = Task(f"images/{pid}.jpg", "landmark", label, lm.index, lm.family, 1_000_000 + img_i)
        lname, fam = lm_label[lm.index], lm.family
    elif kind == "hard_negative":
        fam = FAMILIES[int(rrng.integers(3))]
        task = Task(f"images/{pid}.jpg", "facade", "easy", 100_000 + img_i, fam, 1_000_000 + img_i)
        lname = None
    else:
        fam = theme
        task = Task(f"images/{pid}.jpg", "scene", theme, 0, theme, 1_000_000 + img_i)
        lname = None
    task = Task(task.out, task.kind, task.label, task.subject, task.family, task.key, bool(rrng.random() < SMALL_SHARE))
    return task, lname, fam


def _write_tables(root: Path, cand: _Candidates) -> None:
    """ROOT/truth.parquet and ROOT/images/index.parquet, by photo id."""
    truth = cand.truth
    truth_tab = pa.table({
        "photo_id": pa.array(truth["photo_id"], pa.int64()), "kind": pa.array(truth["kind"], pa.string()),
        "landmark": pa.array(truth["landmark"], pa.string()), "family": pa.array(truth["family"], pa.string()),
        "in_excluded_region": pa.array(truth["in_excluded_region"], pa.bool_()),
        "place": pa.array(truth["place"], pa.string()), "view": pa.array(truth["view"], pa.string()),
        "copy_of": pa.array(truth["copy_of"], pa.string()),
    }).sort_by("photo_id")
    atomic.write_parquet(root / TRUTH, truth_tab, compression="zstd")
    index = cand.index
    idx_tab = pa.table({"photo_id": pa.array(index["photo_id"], pa.int64()),
                        "server": pa.array(index["server"], pa.int32()),
                        "farm": pa.array(index["farm"], pa.int32()),
                        "secret": index["secret"], "secret_original": index["secret_original"],
                        "extension": index["extension"],
                        "photo_hash": pa.array(index["photo_hash"], pa.string())}).sort_by("photo_id")
    atomic.write_parquet(root / "images" / IMAGE_INDEX, idx_tab, compression="zstd")


def _world(options: DemoOptions, built: list[tuple[list[str], list[dict], list[str], list[Landmark]]],
           lms: list[Landmark], lm_label: dict[int, str], cand: _Candidates, planted: dict[str, int]) -> dict[str, Any]:
    """world.json's content (a several-city world adds its benchmarks)."""
    kinds_count = {k: int(sum(1 for x in cand.truth["kind"] if x == k))
                   for k in ("unrelated", "hard_negative", "landmark")}
    return {
        "version": 1, "preset": options.preset, "seed": options.seed,
        "image_size": [VIEW_W, VIEW_H], "min_size": 1024,
        "counts": {
            "landmarks": len(lms), "queries": sum(len(b[0]) for b in built), "database": sum(len(b[2]) for b in built),
            "metadata_rows": len(cand.rows), "malformed_rows": cand.malformed, "photos_without_geotag": cand.nogeo,
            "videos": cand.video, "candidate_images": cand.images, "candidate_kinds": kinds_count,
            "in_excluded_region": int(sum(cand.truth["in_excluded_region"])),
            "small_images": int(sum(t.small for t in cand.tasks)),
            "near_duplicates": planted,
        },
        "malformed_kinds": [defect for _, defect in md.MALFORMED_KINDS],
        "exclusion": md.EXCLUSION,
        "faults": DEFAULT_FAULTS,
        "landmarks": [{"name": lm_label[lm.index], "family": lm.family} for lm in lms],
        "files": {"landmarks": "landmarks/gnd_demo.pkl", "metadata": "metadata/yfcc100m_dataset",
                  "images": "images", "truth": TRUTH, "preview": "preview.png"},
    }


def as_download_folder(world: str | os.PathLike[str], images: str | os.PathLike[str]) -> None:
    """The world's candidate images laid out as a `mining download` output (every photo `ok`,
    keyed by its photo hash, with `index.parquet`): what tests and benchmarks describe without
    running the downloader."""
    world, images = Path(world), Path(images)
    t = pq.read_table(world / "images" / IMAGE_INDEX, columns=["photo_id", "photo_hash"])
    rows = []
    for pid, key in zip(t.column("photo_id").to_pylist(), t.column("photo_hash").to_pylist()):
        rel = key_relpath(key)
        dst = images / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists():
            shutil.copyfile(world / "images" / f"{pid}.jpg", dst)
        rows.append({"photo_id": pid, "photo_hash": key, "status": "ok", "source": "world", "low_res": False,
                     "path": rel})
    imageindex.write(images, rows)
