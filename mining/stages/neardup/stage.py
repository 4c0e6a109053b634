"""Near-duplicates among candidates, and candidates that are near-copies of landmark images.

Why: YFCC holds bursts (one user, one scene, seconds apart); a distractor set that keeps 30
copies of one façade is less hard per image and wastes its budget. And a candidate that is a
near-copy of a landmark query or database image (a re-upload, a crop) almost surely shows the
landmark: it must be reviewed before it can become a distractor.

The criterion (cheap, two independent signals that must agree):
- a 64-bit difference hash (dHash) of the whole image: grey, box-resized to 9×8, one bit per
  horizontally adjacent pair (left brighter than right); two images are close when their
  hashes differ in at most `max_hash_distance` bits (Hamming distance). A crop moves every
  cell, so a landmark image (few of them) is also hashed with 6 % and 12 % trimmed off,
  centred and at each corner, and a candidate's distance to it is the nearest of these 11;
- the cosine similarity of a global descriptor (the run's `cnn-gem`): at least `min_cosine`.
Candidates joined by close pairs form a group (connected components, union-find); a group's
id is its smallest photo id. A candidate is a probable landmark when it is close, by the same
two tests with the landmark thresholds, to a landmark query image (the query's descriptor is
its bbox crop, so the cosine is to the crop) or to a database image of a landmark (Easy,
Hard or Junk of one of its queries); a copy of a database image that belongs to no landmark is
flagged too (`copy_of`), without a landmark.

The thresholds are the manifest's `neardup:` section (`mining.settings.options.NeardupOptions`; their
defaults are the schema's). The defaults were measured on the demo world's planted bursts and re-uploads
(`benchmarks/neardup.py`; figures in docs/stages.md): precision and recall 1 on the micro world,
the hash margins on the tiny world, and the landmark cosine raised to 0.85 after 0.60 flagged
hard negatives (cosine 0.71-0.74) on an unplanted tiny run.

Cost: hashing reads every image once (threads; JPEG draft mode decodes at 1/8 scale). The
candidate pairs are not all pairs: the pairs within the hash distance come from a
multi-index hash (`mining.retrieval.hashindex`, exact), and only their cosines are computed; the
candidates against the landmark images are a (candidates × landmark images) product, linear
in the candidates. `all_close_pairs` (all pairs, O(n²·d)) is kept as the tests' oracle.
Figures: `benchmarks/neardup_index.py` and docs/performance.md.
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
from PIL import Image

from mining.files import atomic
from mining.datasets.benchmarks import as_list, fingerprint, load_all, qualify
from mining.files.names import NEARDUP, STATS
from mining.retrieval.descriptors import as_float32
from mining.errors import UserError
from mining.retrieval.hashindex import hamming_pairs
from mining.photos.imagedecode import open_upright
from mining.photos.imageindex import image_paths
from mining.retrieval.kernels import pair_cosines
from mining.settings.options import NeardupOptions
from mining.console.progress import bar
from mining.retrieval.methodstores import open_method, parse_ids, unit_rows
from mining.compute.threads import in_order

log = logging.getLogger(__name__)

BLOCK = 4096
THREADS = 4  # threads hashing images (the rule passes the rule's threads)


# ----------------------------------------------------------------------------- hashing
def _bits(g: np.ndarray) -> int:
    return int(np.packbits((g[:, :-1] > g[:, 1:]).ravel()).view(">u8")[0])


def dhash(path: Path, trims: Sequence[float] = (0.0,)) -> int | list[int] | None:
    """64-bit difference hash of an image file (None: unreadable). With several `trims`, a
    list: the hash of the whole image (trim 0) and, per trim t > 0, of the image with a
    fraction t cut off each dimension, centred and at each corner (what a cropped copy looks like)."""
    try:  # as shown (EXIF orientation, 16 bits scaled to 8); JPEG: decoded at a reduced scale, much faster
        with open_upright(path, "L", size=(288, 256)) as im:
            w, h = im.size
            out = []
            for t in trims:
                cw, ch = w * (1 - t), h * (1 - t)
                anchors = [(0.5, 0.5)] if t == 0 else [(0.5, 0.5), (0, 0), (1, 0), (0, 1), (1, 1)]
                for ax, ay in anchors:
                    x0, y0 = (w - cw) * ax, (h - ch) * ay
                    g = im.resize((9, 8), Image.Resampling.BOX, box=(x0, y0, x0 + cw, y0 + ch))
                    out.append(_bits(np.asarray(g, dtype=np.int16)))
    except (OSError, ValueError):
        return None
    return out[0] if len(trims) == 1 else out


LANDMARK_TRIMS = (0.0, 0.06, 0.12)  # landmark images: hashed whole and trimmed (11 hashes each)


def hash_files(paths: Sequence[Path], threads: int = THREADS, trims: Sequence[float] = (0.0,),
               progress: bool = False, desc: str = "neardup: hashing") -> tuple[np.ndarray, np.ndarray]:
    """uint64 hashes of the files, in order ((n,), or (n, variants) with several trims) and
    whether each file was readable (unreadable → hash 0)."""
    threads = max(1, threads)
    with ThreadPoolExecutor(threads) as pool:  # Pillow releases the GIL while decoding
        found = [h for _, h in bar(in_order(pool, lambda p: dhash(p, trims), paths, 4 * threads), total=len(paths),
                                   desc=desc, unit="img", disable=not progress)]
    width = 1 if len(trims) == 1 else 1 + 5 * (len(trims) - 1)
    arr = np.array([(h if isinstance(h, list) else [h]) if h is not None else [0] * width for h in found],
                   dtype=np.uint64).reshape(len(found), width)
    return (arr[:, 0] if len(trims) == 1 else arr), np.array([h is not None for h in found], dtype=bool)


_POPCOUNT8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bitwise distance of uint64 hashes (broadcasting)."""
    x = np.bitwise_xor(np.asarray(a, np.uint64), np.asarray(b, np.uint64))
    octets = np.ascontiguousarray(x).reshape(-1).view(np.uint8).reshape(x.shape + (8,))
    return _POPCOUNT8[octets].sum(axis=-1, dtype=np.int64)


# ----------------------------------------------------------------------------- groups
def _find(parent: np.ndarray, i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = int(parent[i])
    return i


def groups_of(n: int, pairs: np.ndarray) -> np.ndarray:
    """Connected components of (i, j) pairs over 0..n-1: the smallest member index of each."""
    parent = np.arange(n, dtype=np.int64)
    for i, j in pairs.tolist():
        a, b = _find(parent, i), _find(parent, j)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return np.array([_find(parent, i) for i in range(n)], dtype=np.int64)


def close_pairs(vectors: np.ndarray, hashes: np.ndarray, ok: np.ndarray, th: NeardupOptions,
                rows: np.ndarray | None = None, normalize: bool = False, threads: int = 1,
                progress: bool = False) -> np.ndarray:
    """(i, j), i < j, of candidates that pass both tests, in (i, j) order, without comparing
    all pairs: the hash test first, exactly, by multi-index hashing (`mining.retrieval.hashindex`), then
    the cosine of the pairs it leaves, summed in float64 from each row's unit float32 values
    (`kernels.pair_cosines`; the all-pairs oracle, `all_close_pairs`, takes float32 GEMM
    tiles: a pair whose cosine is within ~1e-6 of `min_cosine` is the one place they could differ).

    `rows`: candidate i's row of `vectors` is rows[i] (default: i). `normalize`: `vectors`
    are a store's raw rows (float16), each divided by its norm where used, as `unit_rows` does
    (same bits: the norms are unit_rows' own, computed row by row)."""
    rows = np.arange(len(hashes)) if rows is None else np.asarray(rows, np.int64)
    scale = np.ones(len(vectors), np.float32)
    if normalize:
        for a in range(0, len(vectors), BLOCK):
            scale[a:a + BLOCK] = np.maximum(np.linalg.norm(as_float32(vectors[a:a + BLOCK]), axis=1), 1e-12)
    stored = vectors.view(np.uint16) if vectors.dtype == np.float16 else vectors

    def cosine_passes(pairs: np.ndarray) -> np.ndarray:
        readable = np.flatnonzero(ok[pairs[:, 0]] & ok[pairs[:, 1]])
        cos = np.empty(readable.size, np.float64)
        pair_cosines(stored, rows[pairs[readable, 0]], rows[pairs[readable, 1]], scale, cos)
        keep = np.zeros(len(pairs), bool)
        keep[readable] = cos >= th.min_cosine
        return keep

    with bar(total=None, desc="neardup: pairs", unit="chunk", disable=not progress) as tiles:
        pairs = hamming_pairs(hashes, th.max_hash_distance, threads=threads, progress=tiles, keep=cosine_passes)
    if pairs is None:  # a radius so wide that every pair is a candidate
        return all_close_pairs(vectors[rows], hashes, ok, th, normalize=normalize)
    return pairs


def all_close_pairs(vectors: np.ndarray, hashes: np.ndarray, ok: np.ndarray, th: NeardupOptions,
                    block: int = BLOCK, normalize: bool = False) -> np.ndarray:
    """What `close_pairs` finds, by comparing all pairs (blockwise float32 products, O(n²·d)):
    the test oracle, not used by the stage."""
    def rows(a: int) -> np.ndarray:
        tile = vectors[a:a + block]
        return unit_rows(tile) if normalize else tile

    n = vectors.shape[0]
    out = []
    for a in range(0, n, block):
        left = rows(a)
        for b in range(a, n, block):  # only j ≥ a: each pair once; one block × block tile in memory
            sims = left @ (left if b == a else rows(b)).T
            ii, jj = np.nonzero(sims >= th.min_cosine)
            ii, jj = ii + a, jj + b
            keep = (jj > ii) & ok[ii] & ok[jj]
            ii, jj = ii[keep], jj[keep]
            keep = hamming(hashes[ii], hashes[jj]) <= th.max_hash_distance
            out.append(np.stack([ii[keep], jj[keep]], axis=1))
    pairs = np.concatenate(out) if out else np.zeros((0, 2), np.int64)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))] if pairs.size else pairs.reshape(0, 2).astype(np.int64)


def landmark_copies(raw: np.ndarray, order: np.ndarray, hashes: np.ndarray, ok: np.ndarray, lm_vecs: np.ndarray,
                    lm_hash: np.ndarray, lm_ok: np.ndarray,
                    th: NeardupOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per candidate i (its raw row raw[order[i]]): the landmark image it copies (-1: none),
    the cosine and the hash distance (nearest of the image's crops; NaN / -1 for none). The
    most similar image that passes both landmark tests wins, then the nearest hash, then the
    first image. Linear in the candidates: a block × landmark images product at a time."""
    n = len(order)
    best = np.full(n, -1, np.int64)
    copy_cos, copy_dist = np.full(n, np.nan), np.full(n, -1, np.int64)
    for a in range(0, n, BLOCK):
        sims = unit_rows(raw[order[a:a + BLOCK]]) @ lm_vecs.T
        # hash distances only where the cosine passes (few): a dense (block, images, crops) array
        # of distances would take gigabytes for a 5k-image landmark dataset
        rr, cc = np.nonzero((sims >= th.landmark_min_cosine) & ok[a:a + BLOCK, None] & lm_ok[None, :])
        dist = hamming(hashes[a + rr, None], lm_hash[cc]).min(axis=1)  # the nearest crop
        keep = dist <= th.landmark_max_hash_distance
        rr, cc, dist = rr[keep], cc[keep], dist[keep]
        cos = sims[rr, cc]
        o = np.lexsort((cc, dist, -cos, rr))  # per row: most similar, then nearest hash, then first image
        rr, cc, dist, cos = rr[o], cc[o], dist[o], cos[o]
        first = np.unique(rr, return_index=True)[1]
        at = a + rr[first]
        best[at], copy_cos[at], copy_dist[at] = cc[first], cos[first].astype(np.float64), dist[first]
    return best, copy_cos, copy_dist


# ----------------------------------------------------------------------------- the stage
def database_landmarks(dataset: Any) -> list[str | None]:
    """Per database image: the landmark whose queries list it (Easy, Hard or Junk), first found."""
    out: list[str | None] = [None] * len(dataset.imlist)
    for q, g in enumerate(dataset.gnd):
        for key in ("easy", "hard", "junk", "ok"):
            for j in np.asarray(g.get(key, []), dtype=np.int64).ravel().tolist():
                if 0 <= j < len(out) and out[j] is None:
                    out[j] = dataset.query_landmark(q)
    return out


# long: the stage's steps (each its own function) in order, then its table and stats.json
def run(*, images: Path, landmarks: Sequence[str], descriptors: Path, out: Path, options: NeardupOptions,
        threads: int = THREADS, progress: bool = False) -> dict[str, Any]:
    """`mining neardup`: NEARDUP/neardup.parquet (one row per described candidate) + stats.json.

    `images`: `mining download`'s folder (jpg/ layout); `landmarks`: [NAME=]GND, one ground truth
    or several benchmarks (`mining.datasets.benchmarks.as_list`; with several, landmark and image names
    are `<benchmark>/<name>`); `descriptors`: a global method's DESC/<method> folder."""
    t0 = time.perf_counter()
    benchmarks = as_list(landmarks)
    datasets = load_all(benchmarks)
    several = len(benchmarks) > 1
    stores = open_method(Path(descriptors), global_for="near-duplicates need",  # the candidates (any benchmark's view)
                         benchmark=benchmarks[0].name if several else None)
    if not Path(images).is_dir():
        raise UserError(f"{images}: image folder not found")
    # the store's rows as they are (float16): 2 bytes per value instead of float32 unit rows'
    # 4, made unit float32 rows where used (R1M: 4.2 GB held; photo-id order through `order`,
    # not a reordered copy)
    c_ids, raw = stores.candidates.load_all(as_stored=True)
    pid = parse_ids(c_ids, f"{descriptors}/candidates")
    order = np.argsort(pid, kind="stable")  # candidate i (by photo id) is raw[order[i]]: no reordered copy
    pid = pid[order]
    hashes, ok = hash_files(image_paths(images, pid), threads, progress=progress)
    pairs = close_pairs(raw, hashes, ok, options, rows=order, normalize=True, threads=threads, progress=progress)
    root = groups_of(pid.size, pairs)
    group = pid[root]
    size = np.bincount(root, minlength=pid.size)[root]
    lm_images = landmark_images(descriptors, benchmarks, datasets, raw.shape[1])
    lm_hash, lm_ok = hash_files(lm_images.paths, threads, LANDMARK_TRIMS, progress=progress,
                                desc="neardup: hashing landmark images")
    best, copy_cos, copy_dist = landmark_copies(raw, order, hashes, ok, lm_images.vectors, lm_hash, lm_ok, options)
    copy_of = np.array([None if b < 0 else lm_images.names[b] for b in best.tolist()], dtype=object)
    probable = np.array([None if b < 0 else lm_images.owners[b] for b in best.tolist()], dtype=object)
    table = pa.table({
        "photo_id": pa.array(pid, pa.int64()),
        "dhash": pa.array(hashes.view(np.int64), pa.int64()),
        "hash_ok": pa.array(ok, pa.bool_()),
        "group": pa.array(group, pa.int64()),
        "group_size": pa.array(size, pa.int64()),
        "copy_of": pa.array(copy_of.tolist(), pa.string()),
        "probable_landmark": pa.array(probable.tolist(), pa.string()),
        "copy_cosine": pa.array(copy_cos, pa.float64(), mask=np.isnan(copy_cos)),
        "copy_hash_distance": pa.array(copy_dist, pa.int64()),
    })
    multi = size > 1
    stats = {
        "method": stores.name,
        "thresholds": {"max_hash_distance": options.max_hash_distance, "min_cosine": options.min_cosine,
                       "landmark_max_hash_distance": options.landmark_max_hash_distance,
                       "landmark_min_cosine": options.landmark_min_cosine},
        "candidates": int(pid.size), "unreadable_images": int((~ok).sum()), "pairs": int(len(pairs)),
        "groups": int(np.unique(group[multi]).size), "candidates_in_groups": int(multi.sum()),
        "redundant": int(multi.sum() - np.unique(group[multi]).size),
        "copies_of_landmark_images": int(sum(c is not None for c in copy_of)),
        "probable_landmark": {qualify(b.name, lm, several): int(sum(p == qualify(b.name, lm, several) for p in probable))
                              for b, dataset in zip(benchmarks, datasets) for lm in dataset.landmarks},
        "landmarks_fingerprint": fingerprint([(b.name, d.fingerprint()) for b, d in zip(benchmarks, datasets)]),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    atomic.write_parquet(Path(out) / NEARDUP, table)
    atomic.write_json(Path(out) / STATS, stats)
    return stats


@dataclass(frozen=True)
class LandmarkImages:
    """Every benchmark's query and database images, in that order: their (qualified) names,
    the landmark each belongs to (None: none), files and unit descriptor rows."""

    names: list[str]
    owners: list[str | None]
    paths: list[Path]
    vectors: np.ndarray


def landmark_images(descriptors: Path, benchmarks: Sequence[Any], datasets: Sequence[Any], dim: int) -> LandmarkImages:
    """The landmark images a candidate may copy: queries (their crops' descriptors) and
    database images, of every benchmark."""
    several = len(benchmarks) > 1
    names: list[str] = []
    owners: list[str | None] = []
    vecs, paths = [], []
    for b, dataset in zip(benchmarks, datasets):
        mine = open_method(Path(descriptors), global_for="near-duplicates need", benchmark=b.name if several else None)
        db_owner = database_landmarks(dataset)
        for part, lookup in (("queries", {n: dataset.query_landmark(i) for i, n in enumerate(dataset.qimlist)}),
                             ("database", dict(zip(dataset.imlist, db_owner)))):
            ids, payload = getattr(mine, part).load_all()
            names += [qualify(b.name, i, several) for i in ids]
            owners += [None if lookup.get(i) is None else qualify(b.name, lookup[i], several) for i in ids]
            paths += [dataset.image_path(i) for i in ids]
            vecs.append(unit_rows(payload) if len(ids) else np.zeros((0, dim), np.float32))
    return LandmarkImages(names, owners, paths, np.concatenate(vecs) if vecs else np.zeros((0, dim), np.float32))


# ----------------------------------------------------------------------------- measured on planted copies
def measure(table: Any, truth: Any) -> dict[str, Any]:
    """Precision and recall of the groups (over pairs of candidates) and of the landmark copies,
    against the demo world's truth (`copy_of`: "photo:<id>" for a burst copy, a landmark image
    name for a re-upload). Only candidates present in `table` count."""
    t = truth.set_index("photo_id")
    ids = table["photo_id"].to_numpy(np.int64)
    present = set(ids.tolist())
    true_group = {}
    for p in ids.tolist():
        c = t.at[p, "copy_of"] if p in t.index else None
        true_group[p] = int(c[6:]) if isinstance(c, str) and c.startswith("photo:") else p
    pred = dict(zip(ids.tolist(), table["group"].to_numpy(np.int64).tolist()))

    def pairs(assign: dict[int, int]) -> set[tuple[int, int]]:
        by: dict[int, list[int]] = {}
        for p, g in assign.items():
            by.setdefault(g, []).append(p)
        return {(a, b) for m in by.values() for i, a in enumerate(sorted(m)) for b in sorted(m)[i + 1:]}

    tp_pairs, pp = pairs(true_group), pairs(pred)
    reup = {p for p in present if isinstance(t.at[p, "copy_of"] if p in t.index else None, str)
            and not t.at[p, "copy_of"].startswith("photo:")}
    flagged = set(table.loc[table["copy_of"].notna(), "photo_id"].astype(np.int64).tolist())
    right_lm = {p for p in flagged & reup
                if table.loc[table["photo_id"] == p, "probable_landmark"].iloc[0] == t.at[p, "landmark"]}
    ratio = lambda a, b: float(a / b) if b else None  # noqa: E731
    return {
        "groups": {"true_pairs": len(tp_pairs), "found_pairs": len(pp), "correct_pairs": len(tp_pairs & pp),
                   "precision": ratio(len(tp_pairs & pp), len(pp)), "recall": ratio(len(tp_pairs & pp), len(tp_pairs))},
        "landmark_copies": {"planted": len(reup), "flagged": len(flagged), "correct": len(flagged & reup),
                            "right_landmark": len(right_lm),
                            "precision": ratio(len(flagged & reup), len(flagged)), "recall": ratio(len(flagged & reup), len(reup))},
    }


def stats_json(path: Path) -> dict[str, Any] | None:
    p = Path(path) / STATS
    return json.loads(p.read_text()) if p.is_file() else None
