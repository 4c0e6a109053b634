"""A landmark's façade for the demo world: wall, relief layer, side wall and windows of one of
three families, drawn once per landmark and then viewed by `views`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from mining.stages.demo.paint import jitter, texture


FAMILIES = ("gothic", "classical", "modern")

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
    base = jitter(rng, _PALETTES[family][int(rng.integers(len(_PALETTES[family])))], 12)
    material = _MATERIALS[family][int(rng.integers(3))]
    tex = texture(rng, H, W, base, material)
    wall = np.clip(tex, 0, 255).astype(np.uint8)
    mask = np.zeros((H, W), np.uint8)
    lights = np.zeros((H, W), np.uint8)
    relief = np.zeros((H, W, 3), np.uint8)
    relief_mask = np.zeros((H, W), np.uint8)
    y0 = roof_h  # top of the body
    cv2.rectangle(mask, (0, y0), (W - 1, H - 1), 255, -1)
    dark = jitter(rng, (60, 55, 50), 15)
    trim = jitter(rng, tuple(min(255, c + 35) for c in base), 10)
    glass = jitter(rng, (90, 70, 50) if family != "modern" else (150, 120, 80), 15)
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
        cv2.fillPoly(wall, [inner], jitter(rng, base, 8))
        if rng.random() < 0.5:
            r = int(W * rng.uniform(0.12, 0.2))
            cv2.ellipse(mask, (W // 2, y0 - int(roof_h * 0.5)), (r, r), 0, 180, 360, 255, -1)
            cv2.ellipse(wall, (W // 2, y0 - int(roof_h * 0.5)), (r, r), 0, 180, 360, jitter(rng, (120, 140, 110), 20), -1)
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
        col = jitter(rng, trim, 30)
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
    rel_tex = np.clip(texture(rng, H, W, rel_col, "stone" if family != "modern" else "concrete"), 0, 255).astype(np.uint8)
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
    side = np.clip(texture(rng, body_h, D, np.array(base) * 0.92, material), 0, 255).astype(np.uint8)
    n_side = max(1, D // bay_w)
    for f in range(floors):
        for b in range(n_side):
            wx = int((b + 0.5) * D / n_side - win_w / 2)
            wy = 20 + f * floor_h + (floor_h - win_h) // 2
            cv2.rectangle(side, (wx, wy), (wx + win_w, wy + win_h), glass, -1)
    return Facade(family, wall, mask, lights, relief, relief_mask, side, body_h)
