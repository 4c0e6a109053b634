"""Procedural photos for the demo world: landmark façades, their views, and unrelated scenes.

Everything is drawn with numpy + OpenCV from a seeded `numpy.random.Generator`, so an item's
pixels depend only on its own seed (items render independently, in any order or process).
The probe in docs/references.md shaped the choices here: views warp the building *mask* with
a real camera model (no sky rectangle), the façade has a relief layer in front of the wall and
a side wall, so viewpoint changes cause parallax (Easy is not a trivial re-warp), Hard views
carry one strong problem each, and unrelated candidates are photo-like scenes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

FAMILIES = ("gothic", "classical", "modern")
VIEW_W, VIEW_H = 1024, 768

# Per family: wall palettes (BGR) and the materials a façade may be built of.
_PALETTES = {
    "gothic": [(150, 160, 170), (120, 135, 150), (170, 185, 195), (110, 115, 120), (140, 160, 185)],
    "classical": [(200, 215, 225), (170, 200, 225), (215, 225, 230), (150, 185, 215), (185, 190, 200)],
    "modern": [(180, 180, 178), (95, 70, 160), (150, 150, 150), (200, 200, 195), (120, 110, 100)],
}
_MATERIALS = {
    "gothic": ("stone", "stone", "brick"),
    "classical": ("plaster", "stone", "plaster"),
    "modern": ("concrete", "brick", "concrete"),
}


def _noise(rng: np.random.Generator, h: int, w: int, cell: float, octaves: int = 3) -> np.ndarray:
    """Multi-octave value noise in [0, 1] (cheap: random grids upsampled by OpenCV)."""
    if cell >= 24 and h >= 16 and w >= 16:  # smooth noise: draw at a quarter size, upsample once
        small = _noise(rng, max(2, h // 4), max(2, w // 4), cell / 4, octaves)
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


def _jitter(rng: np.random.Generator, colour, amount: float = 20) -> tuple[int, int, int]:
    return tuple(int(np.clip(c + rng.normal(0, amount), 0, 255)) for c in colour)  # type: ignore[return-value]


def _texture(rng: np.random.Generator, h: int, w: int, base, material: str) -> np.ndarray:
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
    grain = _noise(rng, h, w, 6, 3) - 0.5
    weather = _noise(rng, h, w, 120, 2) - 0.5
    img = img + (grain * 30)[..., None] + (weather * 40)[..., None]
    return img


def _arch_window(img, mask, x, y, w, h, glass, frame, pointed: bool, tracery: bool) -> None:
    """A window with a round or pointed arch; `mask` marks glass (lit at night)."""
    x, y, w, h = int(x), int(y), int(w), int(h)
    r = w // 2
    body = np.array([[x, y + r], [x + w, y + r], [x + w, y + h], [x, y + h]], np.int32)
    if pointed:
        top = np.array([[x, y + r], [x + w // 2, y - r // 2], [x + w, y + r]], np.int32)
        cv2.fillPoly(img, [top], frame)
        cv2.fillPoly(img, [top + np.array([[3, 2], [0, 4], [-3, 2]])], glass)
        cv2.fillPoly(mask, [top], 255)
    else:
        cv2.ellipse(img, (x + r, y + r), (r, r), 0, 180, 360, frame, -1)
        cv2.ellipse(img, (x + r, y + r), (max(1, r - 3), max(1, r - 3)), 0, 180, 360, glass, -1)
        cv2.ellipse(mask, (x + r, y + r), (r, r), 0, 180, 360, 255, -1)
    cv2.rectangle(img, (x, y + r), (x + w, y + h), frame, -1)
    cv2.rectangle(img, (x + 3, y + r), (x + w - 3, y + h - 3), glass, -1)
    cv2.fillPoly(mask, [body], 255)
    if tracery:
        cv2.line(img, (x + w // 2, y), (x + w // 2, y + h), frame, 2)
        cv2.line(img, (x, y + r + (h - r) // 2), (x + w, y + r + (h - r) // 2), frame, 2)


@dataclass
class Facade:
    """A rendered landmark or building: front wall, relief layer, side wall, masks."""

    family: str
    wall: np.ndarray  # H×W×3 uint8, front wall incl. roof/spires
    mask: np.ndarray  # H×W uint8, 255 where the building is
    lights: np.ndarray  # H×W uint8, windows that glow at night
    relief: np.ndarray  # H×W×3 uint8, columns/buttresses/porch standing in front of the wall
    relief_mask: np.ndarray
    side: np.ndarray  # Hs×D×3 uint8, the side wall
    body_h: int  # height of the wall below the roof line


def render_facade(family: str, rng: np.random.Generator) -> Facade:
    """Draw one building of `family`; every call with a fresh rng gives a new instance."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family}")
    floors = int(rng.integers(3, 6))
    floor_h = int(rng.integers(80, 110))
    bays = int(rng.integers(4, 8)) | 1  # odd: a central bay for the door
    bay_w = int(rng.integers(80, 115))
    W = bays * bay_w + 2 * int(rng.integers(20, 50))
    body_h = floors * floor_h + int(rng.integers(20, 60))
    roof_h = {"gothic": int(rng.integers(180, 300)), "classical": int(rng.integers(90, 170)),
              "modern": int(rng.integers(15, 40))}[family]
    H = body_h + roof_h
    base = _jitter(rng, _PALETTES[family][int(rng.integers(len(_PALETTES[family])))], 12)
    material = _MATERIALS[family][int(rng.integers(3))]
    tex = _texture(rng, H, W, base, material)
    wall = np.clip(tex, 0, 255).astype(np.uint8)
    mask = np.zeros((H, W), np.uint8)
    lights = np.zeros((H, W), np.uint8)
    relief = np.zeros((H, W, 3), np.uint8)
    relief_mask = np.zeros((H, W), np.uint8)
    y0 = roof_h  # top of the body
    cv2.rectangle(mask, (0, y0), (W - 1, H - 1), 255, -1)
    dark = _jitter(rng, (60, 55, 50), 15)
    trim = _jitter(rng, tuple(min(255, c + 35) for c in base), 10)
    glass = _jitter(rng, (90, 70, 50) if family != "modern" else (150, 120, 80), 15)
    margin = (W - bays * bay_w) // 2

    # Roof line: spires and gable (gothic), pediment and maybe a dome (classical), parapet (modern).
    if family == "gothic":
        gable = np.array([[margin, y0], [W // 2, int(y0 - roof_h * 0.55)], [W - margin, y0]], np.int32)
        cv2.fillPoly(mask, [gable], 255)
        for sx in (margin // 2 + 4, W - margin // 2 - 4):
            sw = max(16, margin)
            spire = np.array([[sx - sw // 2, y0 + 40], [sx, int(rng.integers(5, 40))], [sx + sw // 2, y0 + 40]], np.int32)
            cv2.fillPoly(mask, [spire], 255)
            cv2.rectangle(mask, (sx - sw // 2, y0 - 60), (sx + sw // 2, y0 + 40), 255, -1)
        cx, cy, rr = W // 2, y0 + floor_h // 2 + 10, int(min(bay_w * 1.1, floor_h * 0.9))
        cv2.circle(wall, (cx, cy), rr, trim, -1)
        cv2.circle(wall, (cx, cy), rr - 8, glass, -1)
        cv2.circle(lights, (cx, cy), rr - 8, 255, -1)
        spokes = int(rng.integers(6, 13))
        for k in range(spokes):
            a = 2 * math.pi * k / spokes
            cv2.line(wall, (cx, cy), (int(cx + (rr - 8) * math.cos(a)), int(cy + (rr - 8) * math.sin(a))), trim, 3)
        cv2.circle(wall, (cx, cy), rr // 3, trim, 3)
    elif family == "classical":
        ped = np.array([[margin - 10, y0], [W // 2, y0 - int(roof_h * 0.8)], [W - margin + 10, y0]], np.int32)
        cv2.fillPoly(mask, [ped], 255)
        cv2.fillPoly(wall, [ped], trim)
        inner = np.array([[margin + 20, y0 - 8], [W // 2, y0 - int(roof_h * 0.8) + 22], [W - margin - 20, y0 - 8]], np.int32)
        cv2.fillPoly(wall, [inner], _jitter(rng, base, 8))
        if rng.random() < 0.5:
            r = int(W * rng.uniform(0.12, 0.2))
            cv2.ellipse(mask, (W // 2, y0 - int(roof_h * 0.5)), (r, r), 0, 180, 360, 255, -1)
            cv2.ellipse(wall, (W // 2, y0 - int(roof_h * 0.5)), (r, r), 0, 180, 360, _jitter(rng, (120, 140, 110), 20), -1)
        cv2.rectangle(wall, (0, y0), (W, y0 + 14), trim, -1)
    else:
        cv2.rectangle(mask, (0, y0 - roof_h), (W - 1, y0), 255, -1)
        cv2.rectangle(wall, (0, y0 - roof_h), (W - 1, y0), trim, -1)
        if rng.random() < 0.6:  # a rooftop box
            bx = int(rng.integers(0, W // 2))
            cv2.rectangle(mask, (bx, y0 - roof_h - 50), (bx + W // 3, y0 - roof_h), 255, -1)
            cv2.rectangle(wall, (bx, y0 - roof_h - 50), (bx + W // 3, y0 - roof_h), dark, -1)

    # Windows per floor and bay, a door in the middle bay.
    style_pointed = family == "gothic"
    win_w = int(bay_w * rng.uniform(0.38, 0.6))
    win_h = int(floor_h * rng.uniform(0.5, 0.72))
    for f in range(floors):
        fy = y0 + 20 + f * floor_h
        if family != "modern":
            cv2.line(wall, (0, fy - 6), (W, fy - 6), trim, int(rng.integers(3, 8)))
        for b in range(bays):
            bx = margin + b * bay_w
            if f == floors - 1 and b == bays // 2:
                dw, dh = int(bay_w * 0.7), int(floor_h * 0.85)
                dx, dy = bx + (bay_w - dw) // 2, H - dh
                _arch_window(wall, lights, dx, dy, dw, dh, dark, trim, style_pointed, False)
                continue
            if family == "gothic" and f == 0 and b == bays // 2:
                continue  # the rose window
            wx, wy = bx + (bay_w - win_w) // 2, fy + (floor_h - win_h) // 2
            if family == "modern":
                cv2.rectangle(wall, (bx + 4, fy), (bx + bay_w - 4, fy + floor_h - 14), glass, -1)
                cv2.rectangle(lights, (bx + 4, fy), (bx + bay_w - 4, fy + floor_h - 14), 255, -1)
                cv2.line(wall, (bx + bay_w // 2, fy), (bx + bay_w // 2, fy + floor_h - 14), trim, 2)
                refl = int(rng.integers(0, 60))
                cv2.line(wall, (bx + 8, fy + floor_h - 20), (bx + bay_w - 8, fy + 4), tuple(min(255, c + refl) for c in glass), 3)
            else:
                _arch_window(wall, lights, wx, wy, win_w, win_h, glass, trim, style_pointed, family == "gothic")
                if family == "classical" and rng.random() < 0.85:
                    tri = np.array([[wx - 6, wy - 2], [wx + win_w // 2, wy - 18], [wx + win_w + 6, wy - 2]], np.int32)
                    cv2.fillPoly(wall, [tri], trim)
    # Unique ornaments: what lets a local matcher tell two buildings of a family apart.
    for _ in range(int(rng.integers(4, 9))):
        ox, oy = int(rng.integers(margin, W - margin)), int(rng.integers(y0 + 10, H - 40))
        kind = int(rng.integers(4))
        col = _jitter(rng, trim, 30)
        if kind == 0:
            r = int(rng.integers(8, 20))
            cv2.circle(wall, (ox, oy), r, col, -1)
            for k in range(8):
                a = k * math.pi / 4
                cv2.line(wall, (ox, oy), (int(ox + r * 1.5 * math.cos(a)), int(oy + r * 1.5 * math.sin(a))), dark, 2)
        elif kind == 1:
            text = "".join(chr(int(c)) for c in rng.integers(65, 91, int(rng.integers(3, 8))))
            cv2.putText(wall, text, (ox - 40, oy), cv2.FONT_HERSHEY_TRIPLEX, rng.uniform(0.6, 1.1), dark, 2, cv2.LINE_AA)
        elif kind == 2:
            pts = (rng.random((5, 2)) * 34 - 17 + [ox, oy]).astype(np.int32)
            cv2.fillPoly(wall, [cv2.convexHull(pts)], col)
            cv2.polylines(wall, [cv2.convexHull(pts)], True, dark, 2)
        else:
            cv2.rectangle(wall, (ox - 14, oy - 22), (ox + 14, oy + 22), dark, -1)
            cv2.ellipse(wall, (ox, oy - 8), (7, 9), 0, 0, 360, col, -1)
            cv2.rectangle(wall, (ox - 8, oy), (ox + 8, oy + 20), col, -1)
    if family == "gothic" and rng.random() < 0.6:  # clock face
        c = (W // 2, y0 - int(roof_h * 0.25))
        cv2.circle(wall, c, 22, (230, 235, 235), -1)
        cv2.circle(wall, c, 22, dark, 2)
        a = rng.uniform(0, 2 * math.pi)
        cv2.line(wall, c, (int(c[0] + 16 * math.cos(a)), int(c[1] + 16 * math.sin(a))), dark, 2)

    # Relief (stands in front of the wall → parallax): buttresses, columns, a portico, balconies.
    rel_col = np.clip(np.array(trim, np.float32) * rng.uniform(0.85, 1.05), 0, 255)
    rel_tex = np.clip(_texture(rng, H, W, rel_col, "stone" if family != "modern" else "concrete"), 0, 255).astype(np.uint8)
    if family == "gothic":
        for b in range(bays + 1):
            x = margin + b * bay_w
            cv2.rectangle(relief_mask, (x - 9, y0 + 40), (x + 9, H - 1), 255, -1)
            pin = np.array([[x - 9, y0 + 40], [x, y0 - 10], [x + 9, y0 + 40]], np.int32)
            cv2.fillPoly(relief_mask, [pin], 255)
    elif family == "classical":
        n_col = int(rng.integers(4, 7))
        span = W - 2 * margin
        for k in range(n_col):
            x = int(margin + span * (k + 0.5) / n_col)
            cw = int(rng.integers(16, 26))
            cv2.rectangle(relief_mask, (x - cw // 2, y0 + 18), (x + cw // 2, H - 1), 255, -1)
            cv2.rectangle(relief_mask, (x - cw // 2 - 6, y0 + 10), (x + cw // 2 + 6, y0 + 22), 255, -1)
        cv2.rectangle(relief_mask, (margin - 10, y0), (W - margin + 10, y0 + 14), 255, -1)
    else:
        for f in range(1, floors, 2):
            fy = y0 + 20 + f * floor_h
            x1 = margin + int(rng.integers(0, 3)) * bay_w
            cv2.rectangle(relief_mask, (x1, fy - 16), (min(W - 1, x1 + int(rng.integers(2, 5)) * bay_w), fy), 255, -1)
        cv2.rectangle(relief_mask, (W // 2 - bay_w, H - floor_h - 10), (W // 2 + bay_w, H - floor_h + 6), 255, -1)
    relief[relief_mask > 0] = rel_tex[relief_mask > 0]
    # Shade the relief's left edges darker so it reads as 3-D.
    edge = cv2.morphologyEx(relief_mask, cv2.MORPH_GRADIENT, np.ones((3, 3), np.uint8))
    relief[edge > 0] = (relief[edge > 0] * 0.6).astype(np.uint8)

    # Side wall: same material, fewer windows.
    D = int(W * rng.uniform(0.35, 0.6))
    side = np.clip(_texture(rng, body_h, D, np.array(base) * 0.92, material), 0, 255).astype(np.uint8)
    n_side = max(1, D // bay_w)
    for f in range(floors):
        for b in range(n_side):
            wx = int((b + 0.5) * D / n_side - win_w / 2)
            wy = 20 + f * floor_h + (floor_h - win_h) // 2
            cv2.rectangle(side, (wx, wy), (wx + win_w, wy + win_h), glass, -1)
    return Facade(family, wall, mask, lights, relief, relief_mask, side, body_h)


# ---------------------------------------------------------------- camera and views


@dataclass(frozen=True)
class ViewParams:
    """How a photo of a façade is taken; one of the `problem`s dominates a Hard view."""

    yaw_deg: float = 0.0
    pitch_deg: float = 3.0
    roll_deg: float = 0.0
    width_frac: float = 0.6  # building width as a fraction of the image width
    cx_frac: float = 0.5  # where the building centre lands (can push it out of frame = crop)
    cy_frac: float = 0.55
    night: bool = False
    occlusion: float = 0.05  # target fraction of the building hidden by foreground objects
    blur: float = 0.0
    gain: float = 1.0
    warmth: float = 0.0
    neighbours: bool = True
    portrait: bool = False


def _look_at(cam: np.ndarray, target: np.ndarray, roll: float) -> np.ndarray:
    fwd = target - cam
    fwd /= np.linalg.norm(fwd)
    right = np.cross(np.array([0.0, 1.0, 0.0]), fwd)
    right /= np.linalg.norm(right)
    up = np.cross(fwd, right)
    R = np.stack([right, up, fwd])
    c, s = math.cos(roll), math.sin(roll)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]) @ R


def _project(P: np.ndarray, R: np.ndarray, cam: np.ndarray) -> np.ndarray:
    q = (P - cam) @ R.T
    return np.stack([q[:, 0] / q[:, 2], -q[:, 1] / q[:, 2]], axis=1)


def _sky(rng: np.random.Generator, h: int, w: int, night: bool) -> np.ndarray:
    if night:
        top, bottom = np.array(_jitter(rng, (40, 15, 10), 6), np.float32), np.array(_jitter(rng, (70, 40, 30), 8), np.float32)
    else:
        top = np.array(_jitter(rng, (200, 140, 80), 25), np.float32)
        bottom = np.array(_jitter(rng, (235, 215, 195), 15), np.float32)
    t = np.linspace(0, 1, h, dtype=np.float32)[:, None, None]
    sky = np.broadcast_to(top * (1 - t) + bottom * t, (h, w, 3)).copy()
    if not night:
        clouds = _noise(rng, h, w, rng.uniform(60, 200), 4)
        cover = rng.uniform(0.35, 0.75)
        a = np.clip((clouds - cover) * 4, 0, 1)[..., None]
        sky = sky * (1 - a) + np.array(_jitter(rng, (235, 235, 235), 10), np.float32) * a
    return sky


def _ground(rng: np.random.Generator, h: int, w: int, night: bool) -> np.ndarray:
    base = np.array(_jitter(rng, (105, 110, 115), 15), np.float32) * (0.25 if night else 1.0)
    img = base + ((_noise(rng, h, w, 8, 3) - 0.5) * 40)[..., None]
    return img


def _generic_building(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A plain neighbour: a box with a window grid (surroundings that change between photos)."""
    h, w = int(rng.integers(250, 600)), int(rng.integers(200, 450))
    base = _jitter(rng, (150, 160, 175), 45)
    img = _texture(rng, h, w, base, ("plaster", "brick", "concrete")[int(rng.integers(3))])
    img = np.clip(img, 0, 255).astype(np.uint8)
    lights = np.zeros((h, w), np.uint8)
    ww, wh = int(rng.integers(22, 45)), int(rng.integers(30, 55))
    gx, gy = ww + int(rng.integers(15, 40)), wh + int(rng.integers(20, 40))
    glass = _jitter(rng, (80, 70, 60), 20)
    for y in range(25, h - wh - 10, gy):
        for x in range(15, w - ww - 5, gx):
            cv2.rectangle(img, (x, y), (x + ww, y + wh), glass, -1)
            if rng.random() < 0.3:
                cv2.rectangle(lights, (x, y), (x + ww, y + wh), 255, -1)
    return img, lights


def _warp_onto(canvas: np.ndarray, alpha_acc: np.ndarray, src: np.ndarray, src_mask: np.ndarray | None,
               H: np.ndarray) -> np.ndarray:
    """Warp `src` (and its mask) by homography H and paint it over `canvas`; return the warped mask."""
    h, w = canvas.shape[:2]
    m = np.full(src.shape[:2], 255, np.uint8) if src_mask is None else src_mask
    wm = cv2.warpPerspective(m, H, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    x, y, bw, bh = cv2.boundingRect(wm)
    if bw == 0 or bh == 0:
        return wm
    # Warp only the covered rectangle: shift the homography's output by (x, y).
    Hs = np.array([[1, 0, -x], [0, 1, -y], [0, 0, 1]], np.float64) @ H
    warped = cv2.warpPerspective(src, Hs, (bw, bh), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    _blend(canvas[y:y + bh, x:x + bw], warped, wm[y:y + bh, x:x + bw])
    np.maximum(alpha_acc, wm, out=alpha_acc)
    return wm


def _blend(dst: np.ndarray, src: np.ndarray, mask: np.ndarray) -> None:
    """dst = dst·(1−a) + src·a in place, a = mask/255 (dst is a float32 view of the canvas)."""
    a = mask.astype(np.float32) * (1 / 255.0)
    a = a[..., None]
    dst -= dst * a
    dst += src.astype(np.float32) * a


def _foreground(rng: np.random.Generator, canvas: np.ndarray, occl: np.ndarray, target_mask: np.ndarray,
                amount: float, ground_y: int, night: bool) -> None:
    """Trees, people, lamp posts, cars and hoardings in front of the building until `amount` is hidden."""
    h, w = canvas.shape[:2]
    area = max(1, int((target_mask > 127).sum()))
    ys, xs = np.nonzero(target_mask > 127)
    if len(xs) == 0:
        return
    x_lo, x_hi, y_lo, y_hi = int(xs.min()), int(xs.max()), int(ys.min()), int(ys.max())
    k = 0.25 if night else 1.0
    fg_noise = _noise(rng, h, w, 10, 2)
    for _ in range(40):
        covered = int(((occl > 0) & (target_mask > 127)).sum()) / area
        if covered >= amount:
            break
        kind = int(rng.integers(5))
        x = int(rng.integers(max(0, x_lo - 50), min(w, x_hi + 50) + 1))
        layer = np.zeros((h, w), np.uint8)
        colour = _jitter(rng, (60, 90, 60), 25)
        if kind == 0 or (amount > 0.3 and rng.random() < 0.5):  # tree
            r = int(rng.integers(50, 50 + int(140 * max(amount, 0.2) * 2)))
            base_y = min(h - 1, max(ground_y, y_hi) + int(rng.integers(0, 80)))
            cv2.rectangle(layer, (x - 8, base_y - r), (x + 8, base_y), 255, -1)
            for _b in range(6):
                cx, cy = x + int(rng.normal(0, r * 0.4)), base_y - r - int(rng.normal(0, r * 0.3))
                cv2.circle(layer, (cx, cy), int(r * rng.uniform(0.4, 0.7)), 255, -1)
            leaves = fg_noise
            tex = np.array(_jitter(rng, (45, 95, 55), 20), np.float32)[None, None] * (0.6 + 0.8 * leaves[..., None]) * k
        elif kind == 1:  # people
            for _p in range(int(rng.integers(2, 8))):
                px, py = x + int(rng.normal(0, 60)), min(h - 1, max(ground_y, y_hi) + int(rng.integers(0, 60)))
                ph = int(rng.integers(90, 200))
                cv2.ellipse(layer, (px, py - ph // 2), (ph // 7, ph // 2 - ph // 8), 0, 0, 360, 255, -1)
                cv2.circle(layer, (px, py - ph + ph // 10), ph // 10, 255, -1)
            tex = np.array(_jitter(rng, (70, 60, 80), 50), np.float32)[None, None] * k + ((fg_noise - 0.5) * 60)[..., None]
        elif kind == 2:  # lamp post / sign
            top = int(rng.integers(max(0, y_lo - 40), max(y_lo, ground_y - 100) + 1))
            cv2.rectangle(layer, (x - 5, top), (x + 5, h - 1), 255, -1)
            cv2.rectangle(layer, (x - 22, top - 14), (x + 22, top + 8), 255, -1)
            tex = np.array((40, 45, 45), np.float32)[None, None] * np.ones((1, 1, 1), np.float32)
        elif kind == 3:  # car or bus
            cw, ch = int(rng.integers(160, 420)), int(rng.integers(70, 200))
            by = min(h - 1, max(ground_y, y_hi) + int(rng.integers(0, 60)))
            cv2.rectangle(layer, (x - cw // 2, by - ch), (x + cw // 2, by), 255, -1)
            tex = np.full((h, w, 3), _jitter(rng, (120, 60, 160), 70), np.float32) * k
            win = np.zeros_like(layer)
            cv2.rectangle(win, (x - cw // 2 + 10, by - ch + 8), (x + cw // 2 - 10, by - ch // 2), 255, -1)
            tex[win > 0] *= 0.4
        else:  # hoarding / scaffold panel
            pw, ph = int(rng.integers(120, 380)), int(rng.integers(120, 320))
            by = min(h - 1, max(ground_y, y_hi) + 10)
            cv2.rectangle(layer, (x - pw // 2, by - ph), (x + pw // 2, by), 255, -1)
            board = np.full((h, w, 3), _jitter(rng, (200, 200, 200), 50), np.uint8)
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
        _blend(canvas[roi], np.broadcast_to(tex, canvas.shape)[roi], layer[roi])
        np.maximum(occl, layer, out=occl)


def _finish(rng: np.random.Generator, img: np.ndarray, blur: float, gain: float, warmth: float, night: bool) -> np.ndarray:
    """Camera response: exposure, white balance, blur, sensor noise, 8-bit."""
    img = img * gain
    img[..., 2] *= 1 + warmth
    img[..., 0] *= 1 - warmth
    if blur > 0.3:
        img = cv2.GaussianBlur(img, (0, 0), blur)
    sigma = 7.0 if night else 2.0
    img = img + (rng.standard_normal(img.shape[:2], dtype=np.float32) * sigma)[..., None]
    return np.clip(img, 0, 255).astype(np.uint8)


def render_view(fac: Facade, p: ViewParams, rng: np.random.Generator,
                size: tuple[int, int] = (VIEW_W, VIEW_H)) -> tuple[np.ndarray, tuple[float, float, float, float] | None]:
    """Photograph façade `fac` with camera `p`; return the image and the building's bbox (None if off-frame)."""
    w, h = (size[1], size[0]) if p.portrait else size
    Hf, Wf = fac.wall.shape[:2]
    # 3-D: façade plane z=0, x centred, y up from the ground; camera on a circle at distance d.
    d = Wf * 2.2
    yaw, pitch = math.radians(p.yaw_deg), math.radians(p.pitch_deg)
    target = np.array([0.0, Hf * 0.45, 0.0])
    cam = np.array([d * math.sin(yaw), 160.0, -d * math.cos(yaw)])
    cam[1] = target[1] - d * math.tan(pitch) if p.pitch_deg else cam[1]
    R = _look_at(cam, target, math.radians(p.roll_deg))

    def plane(u: np.ndarray, v: np.ndarray, z: np.ndarray | float, x_off: float = 0.0) -> np.ndarray:
        return np.stack([u - Wf / 2 + x_off, Hf - v, np.broadcast_to(z, u.shape)], axis=1).astype(np.float64)

    corners = np.array([[0, 0], [Wf, 0], [Wf, Hf], [0, Hf]], np.float64)
    front = _project(plane(corners[:, 0], corners[:, 1], 0.0), R, cam)
    # Scale/translate the image plane so the building has the requested width and position.
    span = front[:, 0].max() - front[:, 0].min()
    f = p.width_frac * w / max(span, 1e-9)
    centre = front.mean(axis=0) * f
    off = np.array([p.cx_frac * w, p.cy_frac * h]) - centre

    def to_img(P: np.ndarray) -> np.ndarray:
        return (_project(P, R, cam) * f + off).astype(np.float32)

    def homography(src_w: int, src_h: int, P: np.ndarray) -> np.ndarray:
        src = np.array([[0, 0], [src_w, 0], [src_w, src_h], [0, src_h]], np.float32)
        return cv2.getPerspectiveTransform(src, to_img(P))

    ground_pts = to_img(np.array([[-5 * Wf, 0, 0], [5 * Wf, 0, 0]], np.float64))
    ground_y = int(np.clip(ground_pts[:, 1].mean(), 0, h - 1))
    canvas = np.zeros((h, w, 3), np.float32)
    canvas[:ground_y] = _sky(rng, max(ground_y, 1), w, p.night)[:ground_y]
    canvas[ground_y:] = _ground(rng, h - ground_y, w, p.night)
    alpha = np.zeros((h, w), np.uint8)
    lights_img = np.zeros((h, w), np.uint8)
    # Neighbours (different each photo), then the side wall, the wall, and the relief in front.
    if p.neighbours:
        for sgn in (-1, 1):
            gap = Wf * rng.uniform(0.05, 0.5)
            nb, nl = _generic_building(rng)
            nh, nw = nb.shape[:2]
            x0 = Wf / 2 + gap if sgn > 0 else -Wf / 2 - gap - nw
            z0 = rng.uniform(-0.3, 1.0) * Wf
            P = np.array([[x0, nh, z0], [x0 + nw, nh, z0], [x0 + nw, 0, z0], [x0, 0, z0]], np.float64)
            Hn = homography(nw, nh, P)
            lights_img = np.maximum(lights_img, cv2.warpPerspective(nl, Hn, (w, h)))
            _warp_onto(canvas, np.zeros_like(alpha), nb, None, Hn)
    sh, sw = fac.side.shape[:2]
    sx = Wf / 2 if yaw > 0 else -Wf / 2
    side_P = np.array([[sx, sh, 0], [sx, sh, sw], [sx, 0, sw], [sx, 0, 0]], np.float64)
    if yaw < 0:
        side_P = side_P[[1, 0, 3, 2]]
    side_img = fac.side if abs(p.yaw_deg) > 4 else None
    if side_img is not None:
        shade = 0.75 if yaw > 0 else 0.85
        _warp_onto(canvas, alpha, (side_img * shade).astype(np.uint8), None, homography(sw, sh, side_P))
    Hw = homography(Wf, Hf, plane(corners[:, 0], corners[:, 1], 0.0))
    wall = fac.wall
    if not p.night:  # sun from one side: a soft horizontal ramp across the façade
        ramp = np.linspace(rng.uniform(0.75, 1.1), rng.uniform(0.75, 1.1), Wf, dtype=np.float32)[None, :, None]
        wall = np.clip(wall * ramp, 0, 255).astype(np.uint8)
    wm = _warp_onto(canvas, alpha, wall, fac.mask, Hw)
    lights_img = np.maximum(lights_img, cv2.warpPerspective(fac.lights, Hw, (w, h)))
    relief_z = -0.07 * Wf
    Hr = homography(Wf, Hf, plane(corners[:, 0], corners[:, 1], relief_z))
    rm = _warp_onto(canvas, alpha, fac.relief, fac.relief_mask, Hr)
    building = np.maximum(wm, rm)
    if p.night:
        floodlit = rng.random() < 0.5
        canvas *= 0.18
        canvas[..., 0] *= 1.3
        glow = (lights_img.astype(np.float32) / 255.0)[..., None] * (rng.random() < 0.5 or 1.0)
        lit = np.array(_jitter(rng, (90, 200, 245), 15), np.float32)
        on = (_noise(rng, h, w, 40, 1) > 0.45).astype(np.float32)[..., None]
        canvas = canvas * (1 - glow * on) + lit * glow * on
        if floodlit:
            bm = (building.astype(np.float32) / 255)[..., None]
            grad = np.linspace(0.6, 1.6, h, dtype=np.float32)[:, None, None]
            canvas = canvas * (1 + bm * grad * 1.5)
            canvas[..., 2] += (bm[..., 0] * 25)
    occl = np.zeros((h, w), np.uint8)
    _foreground(rng, canvas, occl, building, p.occlusion, ground_y, p.night)
    img = _finish(rng, canvas, p.blur, p.gain, p.warmth, p.night)
    visible = building > 127
    if not visible.any():
        return img, None
    ys, xs = np.nonzero(visible)
    return img, (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))


# ---------------------------------------------------------------- view recipes per label


def view_params(label: str, rng: np.random.Generator) -> tuple[ViewParams, str]:
    """Sample a camera for a label: query, easy, hard (one strong problem), junk (partial)."""
    portrait = bool(rng.random() < 0.12)
    common = dict(gain=float(rng.uniform(0.85, 1.15)), warmth=float(rng.uniform(-0.08, 0.1)), portrait=portrait)
    if label == "query":
        return ViewParams(yaw_deg=float(rng.uniform(-12, 12)), width_frac=float(rng.uniform(0.55, 0.75)),
                          cx_frac=float(rng.uniform(0.42, 0.58)), occlusion=float(rng.uniform(0, 0.04)),
                          portrait=False, gain=common["gain"], warmth=common["warmth"]), "query"
    if label == "easy":
        return ViewParams(yaw_deg=float(rng.uniform(-30, 30)), width_frac=float(rng.uniform(0.45, 0.9)),
                          roll_deg=float(rng.normal(0, 2)), pitch_deg=float(rng.uniform(1, 8)),
                          cx_frac=float(rng.uniform(0.4, 0.6)), occlusion=float(rng.uniform(0, 0.15)),
                          blur=float(rng.uniform(0, 1.2)), **common), "easy"
    if label == "hard":
        problem = ("night", "viewpoint", "far", "occlusion")[int(rng.integers(4))]
        base = dict(yaw_deg=float(rng.uniform(-15, 15)), width_frac=float(rng.uniform(0.5, 0.8)),
                    occlusion=float(rng.uniform(0, 0.05)), **common)
        if problem == "night":
            base.update(night=True, blur=float(rng.uniform(0.5, 1.5)))
        elif problem == "viewpoint":
            base.update(yaw_deg=float(rng.choice([-1, 1]) * rng.uniform(50, 64)), width_frac=float(rng.uniform(0.35, 0.6)))
        elif problem == "far":
            base.update(width_frac=float(rng.uniform(0.18, 0.28)), cx_frac=float(rng.uniform(0.25, 0.75)))
        else:
            base.update(occlusion=float(rng.uniform(0.4, 0.55)))
        return ViewParams(**base), problem
    if label == "junk":
        problem = ("partial", "tiny")[int(rng.random() < 0.3)]
        if problem == "partial":  # zoomed into a corner: only a fragment is visible
            return ViewParams(yaw_deg=float(rng.uniform(-25, 25)), width_frac=float(rng.uniform(2.5, 3.5)),
                              cx_frac=float(rng.choice([-1, 1]) * rng.uniform(0.7, 1.0) + 0.5),
                              cy_frac=float(rng.uniform(0.6, 1.2)), occlusion=0.0, **common), problem
        return ViewParams(yaw_deg=float(rng.uniform(-40, 40)), width_frac=float(rng.uniform(0.08, 0.12)),
                          cx_frac=float(rng.uniform(0.2, 0.8)), **common), problem
    raise ValueError(f"unknown view label {label}")


# ---------------------------------------------------------------- unrelated photo-like scenes

SCENES = ("landscape", "seascape", "street", "interior", "objects", "people", "forest")


def _ridge(rng: np.random.Generator, w: int, base: float, amp: float) -> np.ndarray:
    n = _noise(rng, 1, w, rng.uniform(40, 200), 4)[0]
    return base - amp * n


def render_scene(kind: str, rng: np.random.Generator, size: tuple[int, int] = (VIEW_W, VIEW_H)) -> np.ndarray:
    """A photo-like scene that contains no landmark (what most Flickr candidates look like)."""
    w, h = size if rng.random() > 0.15 else (size[1], size[0])
    yy, xx = np.mgrid[0:h, 0:w]
    night = bool(rng.random() < 0.1)
    if kind in ("landscape", "seascape", "forest"):
        horizon = int(h * rng.uniform(0.35, 0.6))
        img = np.zeros((h, w, 3), np.float32)
        img[:] = _sky(rng, h, w, night)
        if kind == "landscape":
            for layer in range(3):
                ridge = _ridge(rng, w, horizon + layer * h * 0.08, h * rng.uniform(0.1, 0.3) / (layer + 1))
                col = np.array(_jitter(rng, (120 - layer * 30, 130 - layer * 20, 110 - layer * 30), 20), np.float32)
                m = yy > ridge[None, :]
                shade = 0.8 + 0.4 * _noise(rng, h, w, 30, 3)
                img[m] = (col[None, None] * shade[..., None])[m]
            m = yy > horizon + h * 0.25
            img[m] = (np.array(_jitter(rng, (60, 140, 90), 25), np.float32) * (0.7 + 0.6 * _noise(rng, h, w, 6, 3))[..., None])[m]
        elif kind == "seascape":
            sea = np.array(_jitter(rng, (140, 100, 40), 25), np.float32)
            waves = np.sin(yy * 0.35 + _noise(rng, h, w, 30, 2) * 12) * 12
            m = yy > horizon
            img[m] = (sea[None, None] + waves[..., None])[m]
            beach = int(h * rng.uniform(0.75, 0.95))
            m2 = yy > beach + 20 * np.sin(xx / rng.uniform(60, 200))
            img[m2] = (np.array(_jitter(rng, (150, 195, 215), 15), np.float32) * (0.85 + 0.3 * _noise(rng, h, w, 4, 2))[..., None])[m2]
        else:
            img[yy > horizon] = np.array(_jitter(rng, (40, 90, 50), 15), np.float32)
            for _ in range(int(rng.integers(10, 30))):
                x, y = int(rng.integers(0, w)), int(rng.integers(horizon, h + 200))
                s = (y - horizon + 60) / h
                cv2.rectangle(img, (x - int(6 * s * 3), y - int(300 * s)), (x + int(6 * s * 3), y), _jitter(rng, (40, 60, 80), 10), -1)
                cv2.circle(img, (x, y - int(300 * s)), int(120 * s), _jitter(rng, (50, 110, 60), 25), -1)
            img *= (0.75 + 0.5 * _noise(rng, h, w, 8, 3))[..., None]
    elif kind == "street":
        img = np.zeros((h, w, 3), np.float32)
        vx, vy = w * rng.uniform(0.35, 0.65), h * rng.uniform(0.35, 0.5)
        img[:] = _sky(rng, h, w, night)
        road = np.array([[vx - 10, vy], [vx + 10, vy], [w * 1.2, h], [-w * 0.2, h]], np.int32)
        g = _ground(rng, h, w, night)
        mask = np.zeros((h, w), np.uint8)
        cv2.fillPoly(mask, [road], 255)
        img[mask > 0] = g[mask > 0]
        for side in (-1, 1):  # building rows converging to the vanishing point
            for k in range(int(rng.integers(3, 7))):
                t0, t1 = k / 6, (k + 1) / 6
                xe = 0 if side < 0 else w
                top0, top1 = -rng.uniform(0.1, 0.5) * h, -rng.uniform(0.1, 0.5) * h
                def lerp(a, b, t):
                    return a + (b - a) * t
                quad = np.array([[lerp(xe, vx, t0), lerp(top0, vy - 40, t0)], [lerp(xe, vx, t1), lerp(top1, vy - 40, t1)],
                                 [lerp(xe, vx, t1), lerp(h, vy, t1)], [lerp(xe, vx, t0), lerp(h, vy, t0)]], np.int32)
                col = _jitter(rng, (150, 160, 175), 45)
                cv2.fillPoly(img, [quad], col)
                for r in range(4):
                    yl = int(lerp(quad[0, 1], quad[3, 1], (r + 0.5) / 5))
                    cv2.line(img, (int(quad[0, 0]), yl), (int(quad[1, 0]), int(lerp(quad[1, 1], quad[2, 1], (r + 0.5) / 5))),
                             _jitter(rng, (70, 70, 70), 20), int(rng.integers(3, 9)))
        img *= (0.85 + 0.3 * _noise(rng, h, w, 10, 3))[..., None]
        occl = np.zeros((h, w), np.uint8)
        target = np.zeros((h, w), np.uint8)
        target[int(vy):, int(w * 0.2):int(w * 0.8)] = 255
        _foreground(rng, img, occl, target, rng.uniform(0.05, 0.3), int(vy), night)
    elif kind == "interior":
        wall = np.array(_jitter(rng, (190, 200, 210), 35), np.float32)
        img = np.broadcast_to(wall, (h, w, 3)).copy()
        x1, y1, x2, y2 = int(w * rng.uniform(0.25, 0.4)), int(h * rng.uniform(0.2, 0.35)), int(w * rng.uniform(0.6, 0.75)), int(h * rng.uniform(0.6, 0.75))
        floor = np.array([[x1, y2], [x2, y2], [w, h], [0, h]], np.int32)
        fcol = _jitter(rng, (60, 100, 140), 30)
        cv2.fillPoly(img, [floor], fcol)
        for k in range(1, 10):
            cv2.line(img, (int(x1 + (x2 - x1) * k / 10), y2), (int(w * k / 10), h), tuple(c * 0.7 for c in fcol), 2)
        cv2.fillPoly(img, [np.array([[0, 0], [x1, y1], [x1, y2], [0, h]], np.int32)], tuple(float(c) * 0.85 for c in wall))
        cv2.fillPoly(img, [np.array([[w, 0], [x2, y1], [x2, y2], [w, h]], np.int32)], tuple(float(c) * 0.9 for c in wall))
        for _ in range(int(rng.integers(2, 6))):  # furniture and frames
            fx, fy = int(rng.integers(0, w - 100)), int(rng.integers(int(h * 0.3), h - 60))
            cv2.rectangle(img, (fx, fy), (fx + int(rng.integers(60, 300)), fy + int(rng.integers(40, 200))), _jitter(rng, (80, 80, 100), 50), -1)
        for _ in range(int(rng.integers(1, 4))):
            fx, fy = int(rng.integers(x1, x2 - 60)), int(rng.integers(y1, y2 - 80))
            cv2.rectangle(img, (fx, fy), (fx + 60, fy + 80), (40, 60, 90), -1)
            cv2.rectangle(img, (fx + 5, fy + 5), (fx + 55, fy + 75), _jitter(rng, (120, 140, 160), 60), -1)
        img *= (0.75 + 0.5 * _noise(rng, h, w, 200, 2))[..., None]
    elif kind == "objects":
        img = np.array(_jitter(rng, (60, 100, 150), 30), np.float32) * (0.8 + 0.4 * _noise(rng, h, w, 5, 2))[..., None]
        img = np.broadcast_to(img, (h, w, 3)).copy() if img.ndim == 3 else img
        img[..., :] *= (0.9 + 0.2 * np.sin(xx / rng.uniform(5, 20)))[..., None]  # wood grain
        for _ in range(int(rng.integers(3, 8))):
            cx, cy, r = int(rng.integers(0, w)), int(rng.integers(0, h)), int(rng.integers(30, 160))
            cv2.ellipse(img, (cx + 10, cy + 12), (r, int(r * 0.7)), 0, 0, 360, (30, 40, 50), -1)
            cv2.ellipse(img, (cx, cy), (r, int(r * 0.7)), 0, 0, 360, _jitter(rng, (128, 128, 128), 80), -1)
            cv2.ellipse(img, (cx - r // 4, cy - r // 5), (r // 4, r // 6), 0, 0, 360, (235, 235, 235), -1)
        img = cv2.GaussianBlur(img, (0, 0), 1.0)
    else:  # people
        img = cv2.GaussianBlur(render_scene(("street", "landscape", "interior")[int(rng.integers(3))], rng, (w, h)).astype(np.float32), (0, 0), 6)
        for _ in range(int(rng.integers(1, 5))):
            px, py, s = int(rng.integers(0, w)), int(h * rng.uniform(0.3, 0.6)), rng.uniform(0.6, 1.4)
            cv2.ellipse(img, (px, int(py + 230 * s)), (int(110 * s), int(170 * s)), 0, 0, 360, _jitter(rng, (90, 60, 60), 60), -1)
            cv2.ellipse(img, (px, py), (int(55 * s), int(70 * s)), 0, 0, 360, _jitter(rng, (140, 170, 210), 30), -1)
            cv2.ellipse(img, (px, int(py - 40 * s)), (int(58 * s), int(40 * s)), 0, 180, 360, _jitter(rng, (30, 40, 60), 20), -1)
        return _finish(rng, img, 0.0, float(rng.uniform(0.9, 1.1)), 0.0, False)
    return _finish(rng, img, float(rng.uniform(0, 1.0)), float(rng.uniform(0.8, 1.15)), float(rng.uniform(-0.08, 0.1)), night)


def encode_jpeg(img: np.ndarray, quality: int = 90) -> bytes:
    """Fixed encoder settings: the same pixels always give the same bytes (no EXIF, no time)."""
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality, cv2.IMWRITE_JPEG_OPTIMIZE, 0])
    if not ok:  # pragma: no cover - OpenCV always encodes a uint8 BGR array
        raise RuntimeError("JPEG encoding failed")
    return buf.tobytes()
