"""Drawing primitives of the demo world's photos (facades, views and unrelated scenes):
value noise, textures, sky, ground, foreground clutter, the camera finish and the JPEG encoding.

Procedural photos for the demo world: landmark façades, their views, and unrelated scenes.

Everything is drawn with numpy + OpenCV from a seeded `numpy.random.Generator`, so an item's
pixels depend only on its own seed (items render independently, in any order or process).
The probe in docs/references.md shaped the choices here: views warp the building *mask* with
a real camera model (no sky rectangle), the façade has a relief layer in front of the wall and
a side wall, so viewpoint changes cause parallax (Easy is not a trivial re-warp), Hard views
carry one strong problem each, and unrelated candidates are photo-like scenes.
"""

from __future__ import annotations

import cv2
import numpy as np

VIEW_W, VIEW_H = 1024, 768


def noise(rng: np.random.Generator, h: int, w: int, cell: float, octaves: int = 3) -> np.ndarray:
    """Multi-octave value noise in [0, 1] (cheap: random grids upsampled by OpenCV)."""
    if cell >= 24 and h >= 16 and w >= 16:  # smooth noise: draw at a quarter size, upsample once
        small = noise(rng, max(2, h // 4), max(2, w // 4), cell / 4, octaves)
        return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)
    acc = np.zeros((h, w), np.float32)
    amp, total = 1.0, 0.0
    for _ in range(octaves):
        gh, gw = max(2, int(h / cell) + 2), max(2, int(w / cell) + 2)
        acc += amp * cv2.resize(rng.random((gh, gw), dtype=np.float32), (w, h), interpolation=cv2.INTER_CUBIC)
        total += amp
        amp *= 0.5
        cell = max(1.0, cell / 2)
    return np.clip(acc / total, 0, 1)


def jitter(rng: np.random.Generator, colour, amount: float = 20) -> tuple[int, int, int]:
    return tuple(int(np.clip(c + rng.normal(0, amount), 0, 255)) for c in colour)  # type: ignore[return-value]


def texture(rng: np.random.Generator, h: int, w: int, base, material: str) -> np.ndarray:
    """Wall material as float32 BGR: brick courses, stone blocks, plaster or concrete panels."""
    base = np.array(base, np.float32)
    yy, xx = np.mgrid[0:h, 0:w]
    if material in ("brick", "stone"):
        bh, bw = (14, 34) if material == "brick" else (int(rng.integers(26, 40)), int(rng.integers(50, 90)))
        row = yy // bh
        col = (xx + (row % 2) * (bw // 2)) // bw
        table = rng.normal(0, 14 if material == "brick" else 10, (row.max() + 2, col.max() + 2)).astype(np.float32)
        shade = table[row, col]
        joint = ((yy % bh) < 2) | (((xx + (row % 2) * (bw // 2)) % bw) < 2)
        img = base[None, None, :] + shade[..., None]
        img[joint] = base * 0.72
    elif material == "concrete":
        ph, pw = int(rng.integers(60, 110)), int(rng.integers(80, 160))
        img = np.broadcast_to(base, (h, w, 3)).copy()
        img[(yy % ph) < 2] *= 0.8
        img[(xx % pw) < 2] *= 0.8
    else:  # plaster
        img = np.broadcast_to(base, (h, w, 3)).copy()
    grain = noise(rng, h, w, 6, 3) - 0.5
    weather = noise(rng, h, w, 120, 2) - 0.5
    img = img + (grain * 30)[..., None] + (weather * 40)[..., None]
    return img


def sky(rng: np.random.Generator, h: int, w: int, night: bool) -> np.ndarray:
    if night:
        top, bottom = np.array(jitter(rng, (40, 15, 10), 6), np.float32), np.array(jitter(rng, (70, 40, 30), 8), np.float32)
    else:
        top = np.array(jitter(rng, (200, 140, 80), 25), np.float32)
        bottom = np.array(jitter(rng, (235, 215, 195), 15), np.float32)
    t = np.linspace(0, 1, h, dtype=np.float32)[:, None, None]
    sky = np.broadcast_to(top * (1 - t) + bottom * t, (h, w, 3)).copy()
    if not night:
        clouds = noise(rng, h, w, rng.uniform(60, 200), 4)
        cover = rng.uniform(0.35, 0.75)
        a = np.clip((clouds - cover) * 4, 0, 1)[..., None]
        sky = sky * (1 - a) + np.array(jitter(rng, (235, 235, 235), 10), np.float32) * a
    return sky


def ground(rng: np.random.Generator, h: int, w: int, night: bool) -> np.ndarray:
    base = np.array(jitter(rng, (105, 110, 115), 15), np.float32) * (0.25 if night else 1.0)
    img = base + ((noise(rng, h, w, 8, 3) - 0.5) * 40)[..., None]
    return img


def blend(dst: np.ndarray, src: np.ndarray, mask: np.ndarray) -> None:
    """dst = dst·(1−a) + src·a in place, a = mask/255 (dst is a float32 view of the canvas)."""
    a = mask.astype(np.float32) * (1 / 255.0)
    a = a[..., None]
    dst -= dst * a
    dst += src.astype(np.float32) * a


# long: the five kinds of object inline, each drawing on one rng in turn (the demo's bytes follow its order)
def foreground(rng: np.random.Generator, canvas: np.ndarray, occl: np.ndarray, target_mask: np.ndarray,
                amount: float, ground_y: int, night: bool) -> None:
    """Trees, people, lamp posts, cars and hoardings in front of the building until `amount` is hidden."""
    h, w = canvas.shape[:2]
    area = max(1, int((target_mask > 127).sum()))
    ys, xs = np.nonzero(target_mask > 127)
    if len(xs) == 0:
        return
    x_lo, x_hi, y_lo, y_hi = int(xs.min()), int(xs.max()), int(ys.min()), int(ys.max())
    k = 0.25 if night else 1.0
    fg_noise = noise(rng, h, w, 10, 2)
    for _ in range(40):
        covered = int(((occl > 0) & (target_mask > 127)).sum()) / area
        if covered >= amount:
            break
        kind = int(rng.integers(5))
        x = int(rng.integers(max(0, x_lo - 50), min(w, x_hi + 50) + 1))
        layer = np.zeros((h, w), np.uint8)
        jitter(rng, (60, 90, 60), 25)  # unused, but its draws keep every later object where the demo world has it
        if kind == 0 or (amount > 0.3 and rng.random() < 0.5):  # tree
            r = int(rng.integers(50, 50 + int(140 * max(amount, 0.2) * 2)))
            base_y = min(h - 1, max(ground_y, y_hi) + int(rng.integers(0, 80)))
            cv2.rectangle(layer, (x - 8, base_y - r), (x + 8, base_y), 255, -1)
            for _b in range(6):
                cx, cy = x + int(rng.normal(0, r * 0.4)), base_y - r - int(rng.normal(0, r * 0.3))
                cv2.circle(layer, (cx, cy), int(r * rng.uniform(0.4, 0.7)), 255, -1)
            leaves = fg_noise
            tex = np.array(jitter(rng, (45, 95, 55), 20), np.float32)[None, None] * (0.6 + 0.8 * leaves[..., None]) * k
        elif kind == 1:  # people
            for _p in range(int(rng.integers(2, 8))):
                px, py = x + int(rng.normal(0, 60)), min(h - 1, max(ground_y, y_hi) + int(rng.integers(0, 60)))
                ph = int(rng.integers(90, 200))
                cv2.ellipse(layer, (px, py - ph // 2), (ph // 7, ph // 2 - ph // 8), 0, 0, 360, 255, -1)
                cv2.circle(layer, (px, py - ph + ph // 10), ph // 10, 255, -1)
            tex = np.array(jitter(rng, (70, 60, 80), 50), np.float32)[None, None] * k + ((fg_noise - 0.5) * 60)[..., None]
        elif kind == 2:  # lamp post / sign
            top = int(rng.integers(max(0, y_lo - 40), max(y_lo, ground_y - 100) + 1))
            cv2.rectangle(layer, (x - 5, top), (x + 5, h - 1), 255, -1)
            cv2.rectangle(layer, (x - 22, top - 14), (x + 22, top + 8), 255, -1)
            tex = np.array((40, 45, 45), np.float32)[None, None] * np.ones((1, 1, 1), np.float32)
        elif kind == 3:  # car or bus
            cw, ch = int(rng.integers(160, 420)), int(rng.integers(70, 200))
            by = min(h - 1, max(ground_y, y_hi) + int(rng.integers(0, 60)))
            cv2.rectangle(layer, (x - cw // 2, by - ch), (x + cw // 2, by), 255, -1)
            tex = np.full((h, w, 3), jitter(rng, (120, 60, 160), 70), np.float32) * k
            win = np.zeros_like(layer)
            cv2.rectangle(win, (x - cw // 2 + 10, by - ch + 8), (x + cw // 2 - 10, by - ch // 2), 255, -1)
            tex[win > 0] *= 0.4
        else:  # hoarding / scaffold panel
            pw, ph = int(rng.integers(120, 380)), int(rng.integers(120, 320))
            by = min(h - 1, max(ground_y, y_hi) + 10)
            cv2.rectangle(layer, (x - pw // 2, by - ph), (x + pw // 2, by), 255, -1)
            board = np.full((h, w, 3), jitter(rng, (200, 200, 200), 50), np.uint8)
            cv2.putText(board, "".join(chr(int(c)) for c in rng.integers(65, 91, 5)), (x - pw // 2 + 10, by - ph // 2),
                        cv2.FONT_HERSHEY_SIMPLEX, 1.2, (30, 30, 160), 3)
            tex = board.astype(np.float32) * k
        bx, by_, bw, bh = cv2.boundingRect(layer)
        if bw == 0 or bh == 0:
            continue
        hides = int(((np.maximum(occl, layer) > 0) & (target_mask > 127)).sum()) / area
        if hides > amount + 0.15:  # an object that would hide far more than asked (e.g. a far view)
            continue
        roi = (slice(by_, by_ + bh), slice(bx, bx + bw))
        blend(canvas[roi], np.broadcast_to(tex, canvas.shape)[roi], layer[roi])
        np.maximum(occl, layer, out=occl)


def finish(rng: np.random.Generator, img: np.ndarray, blur: float, gain: float, warmth: float, night: bool) -> np.ndarray:
    """Camera response: exposure, white balance, blur, sensor noise, 8-bit."""
    img = img * gain
    img[..., 2] *= 1 + warmth
    img[..., 0] *= 1 - warmth
    if blur > 0.3:
        img = cv2.GaussianBlur(img, (0, 0), blur)
    sigma = 7.0 if night else 2.0
    img = img + (rng.standard_normal(img.shape[:2], dtype=np.float32) * sigma)[..., None]
    return np.clip(img, 0, 255).astype(np.uint8)


def encode_jpeg(img: np.ndarray, quality: int = 90) -> bytes:
    """Fixed encoder settings: the same pixels always give the same bytes (no EXIF, no time)."""
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality, cv2.IMWRITE_JPEG_OPTIMIZE, 0])
    if not ok:  # pragma: no cover - OpenCV always encodes a uint8 BGR array
        raise RuntimeError("JPEG encoding failed")
    return buf.tobytes()
