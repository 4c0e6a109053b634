"""A generated city with planted landmark photos: each landmark's images are views of one
drawn façade, and among the candidates, beside unrelated façades, are synthetic "photos" of
a landmark that are not its own views: a partial view (crop), a photo of a photo at an angle
(perspective), a toy model in another scene (scaled down and pasted), a painting (a frame
around it, lower contrast). The geometric evidence must put those in front of reviewers."""

from __future__ import annotations

import pickle
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from mining.photos import imageindex
from mining.settings import layout
from scenes import scene, transformed

LANDMARK_SEEDS = (11, 12, 13)
PLANTS = ("crop", "perspective", "toy", "painting")


def plant(img: np.ndarray, kind: str, seed: int) -> np.ndarray:
    """One synthetic photo of the landmark render `img` (RGB uint8)."""
    h, w = img.shape[:2]
    if kind == "crop":
        return cv2.resize(img[h // 5: h - h // 8, w // 6: w - w // 5], (w, h), interpolation=cv2.INTER_LINEAR)
    if kind == "perspective":
        src = np.float32([[0, 0], [w, 0], [w, h], [0, h]])
        dst = np.float32([[0.1 * w, 0.06 * h], [0.97 * w, 0], [w, h], [0.03 * w, 0.88 * h]])
        return cv2.warpPerspective(img, cv2.getPerspectiveTransform(src, dst), (w, h), borderMode=cv2.BORDER_REFLECT)
    if kind == "toy":
        back = cv2.resize(scene(900 + seed), (int(w * 1.4), int(h * 1.4)))
        small = cv2.resize(img, (int(w * 0.75), int(h * 0.75)), interpolation=cv2.INTER_AREA)
        y, x = int(h * 0.3), int(w * 0.35)
        back[y:y + small.shape[0], x:x + small.shape[1]] = small
        return back
    if kind == "painting":
        low = (img.astype(np.float32) * 0.55 + 70).astype(np.uint8)
        return cv2.copyMakeBorder(low, 28, 28, 28, 28, cv2.BORDER_CONSTANT, value=(110, 70, 30))
    raise ValueError(kind)


def _save(img: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(img).save(path, quality=92)


def make_city(root: Path, distractors: int = 24) -> dict:
    """images/ (a download folder), landmarks/gnd_city.pkl; returns the paths and which
    candidate photo ids are planted landmark photos (photo id -> landmark name)."""
    images, lm = root / "images", root / "landmarks"
    imlist, qimlist, gnd, planted, rows = [], [], [], {}, []
    for li, seed in enumerate(LANDMARK_SEEDS):
        base = scene(seed)
        views = [base, transformed(base, 1), scene(seed + 500)]  # the last: its other side, unlike the rest
        first = len(imlist)
        for v, img in enumerate(views):
            imlist.append(f"lm{li}_db{v}")
            _save(img, lm / "jpg" / f"{imlist[-1]}.jpg")
        qimlist.append(f"lm{li}_q")
        _save(transformed(base, 2), lm / "jpg" / f"{qimlist[-1]}.jpg")
        gnd.append({"bbx": [10, 10, 380, 280], "easy": list(range(first, len(imlist))), "hard": [], "junk": []})
        for k, kind in enumerate(PLANTS):
            pid = 5000 + 10 * li + k
            planted[pid] = qimlist[-1]  # its landmark, named after its one query (mining.datasets.grouping)
            _save(plant(base, kind, pid), images / layout.image_relpath(pid))
            rows.append(pid)
    for j in range(distractors):
        pid = 7000 + j
        _save(scene(300 + j), images / layout.image_relpath(pid))
        rows.append(pid)
    imageindex.write(images, [{"photo_id": p, "status": "ok", "path": layout.image_relpath(p)} for p in sorted(rows)])
    (lm / "gnd_city.pkl").write_bytes(pickle.dumps({"imlist": imlist, "qimlist": qimlist, "gnd": gnd}))
    return {"images": images, "landmarks": lm, "gnd": lm / "gnd_city.pkl", "planted": planted}


def scored(city: dict, root: Path, spatial_verification: dict, review_top: int = 12) -> dict:
    """The city described with rsift-asmk keeping keypoints and rsift-vlad (unverified: it fills
    the queue with unrelated photos too), then scored into ROOT/scores; returns score's stats."""
    from dataclasses import replace

    from mining.settings.options import defaults
    from mining.stages.describe import stage as describe
    from mining.stages.score import Inputs, run

    methods = ("rsift-asmk", "rsift-vlad")
    desc = {m: root / "DESC" / m for m in methods}
    params = {"rsift-asmk": {"codebook_size": 32, "max_features": 400, "spatial_verification": spatial_verification},
              "rsift-vlad": {"vocabulary": 16, "dim": 24, "max_features": 400}}
    settings = defaults("describe")
    stores = root / "DESC" / "{method}"  # desc's folders
    describe.run(inputs=describe.Inputs(images=city["images"], image_set="candidates"), methods=methods,
                 out=stores / "candidates", options=replace(settings, shard_size=10, params=params), progress=False)
    for part in ("queries", "database"):
        describe.run(inputs=describe.Inputs(images=city["landmarks"], image_set=part, models=stores / "candidates"),
                     methods=methods, out=stores / part, options=settings, progress=False)
    return run(inputs=Inputs(landmarks=[str(city["gnd"])], descriptors=[desc[m] for m in methods]), out=root / "scores",
               options=replace(defaults("score"), review_top=review_top), progress=False)
