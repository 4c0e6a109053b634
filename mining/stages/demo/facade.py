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


@dataclass
class _Building:
    """A façade being drawn: its family, sizes (px), colours and canvases (wall, the building's
    mask, the windows that glow)."""

    family: str
    floors: int
    floor_h: int
    bays: int
    bay_w: int
    W: int
    body_h: int
    roof_h: int
    base: tuple
    material: str
    wall: np.ndarray
    mask: np.ndarray
    lights: np.ndarray
    dark: tuple
    trim: tuple
    glass: tuple
    win_w: int = 0
    win_h: int = 0

    @property
    def H(self) -> int:
        return self.body_h + self.roof_h

    @property
    def y0(self) -> int:  # top of the body
        return self.roof_h

    @property
    def margin(self) -> int:
        return (self.W - self.bays * self.bay_w) // 2


def render_facade(family: str, rng: np.random.Generator) -> Facade:
    """Draw one building of `family`; every call with a fresh rng gives a new instance."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family}")
    b = _building(family, rng)
    _roof(b, rng)
    _windows(b, rng)
    _ornaments(b, rng)
    relief, relief_mask = _relief(b, rng)
    return Facade(family, b.wall, b.mask, b.lights, relief, relief_mask, _side(b, rng), b.body_h)


def _building(family: str, rng: np.random.Generator) -> _Building:
    """The building's sizes, colours and blank canvases (its wall textured)."""
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
    wall = np.clip(texture(rng, H, W, base, material), 0, 255).astype(np.uint8)
    mask = np.zeros((H, W), np.uint8)
    cv2.rectangle(mask, (0, roof_h), (W - 1, H - 1), 255, -1)
    dark = jitter(rng, (60, 55, 50), 15)
    trim = jitter(rng, tuple(min(255, c + 35) for c in base), 10)
    glass = jitter(rng, (90, 70, 50) if family != "modern" else (150, 120, 80), 15)
    return _Building(family, floors, floor_h, bays, bay_w, W, body_h, roof_h, base, material, wall, mask,
                     np.zeros((H, W), np.uint8), dark, trim, glass)


def _roof(b: _Building, rng: np.random.Generator) -> None:
    """Roof line: spires, gable and rose window (gothic), pediment and maybe a dome
    (classical), parapet and maybe a rooftop box (modern)."""
    if b.family == "gothic":
        gable = np.array([[b.margin, b.y0], [b.W // 2, int(b.y0 - b.roof_h * 0.55)], [b.W - b.margin, b.y0]], np.int32)
        cv2.fillPoly(b.mask, [gable], 255)
        for sx in (b.margin // 2 + 4, b.W - b.margin // 2 - 4):
            sw = max(16, b.margin)
            spire = np.array([[sx - sw // 2, b.y0 + 40], [sx, int(rng.integers(5, 40))], [sx + sw // 2, b.y0 + 40]],
                             np.int32)
            cv2.fillPoly(b.mask, [spire], 255)
            cv2.rectangle(b.mask, (sx - sw // 2, b.y0 - 60), (sx + sw // 2, b.y0 + 40), 255, -1)
        cx, cy, rr = b.W // 2, b.y0 + b.floor_h // 2 + 10, int(min(b.bay_w * 1.1, b.floor_h * 0.9))
        cv2.circle(b.wall, (cx, cy), rr, b.trim, -1)
        cv2.circle(b.wall, (cx, cy), rr - 8, b.glass, -1)
        cv2.circle(b.lights, (cx, cy), rr - 8, 255, -1)
        spokes = int(rng.integers(6, 13))
        for k in range(spokes):
            a = 2 * math.pi * k / spokes
            cv2.line(b.wall, (cx, cy), (int(cx + (rr - 8) * math.cos(a)), int(cy + (rr - 8) * math.sin(a))), b.trim, 3)
        cv2.circle(b.wall, (cx, cy), rr // 3, b.trim, 3)
    elif b.family == "classical":
        ped = np.array([[b.margin - 10, b.y0], [b.W // 2, b.y0 - int(b.roof_h * 0.8)], [b.W - b.margin + 10, b.y0]],
                       np.int32)
        cv2.fillPoly(b.mask, [ped], 255)
        cv2.fillPoly(b.wall, [ped], b.trim)
        inner = np.array([[b.margin + 20, b.y0 - 8], [b.W // 2, b.y0 - int(b.roof_h * 0.8) + 22],
                          [b.W - b.margin - 20, b.y0 - 8]], np.int32)
        cv2.fillPoly(b.wall, [inner], jitter(rng, b.base, 8))
        if rng.random() < 0.5:
            r = int(b.W * rng.uniform(0.12, 0.2))
            cv2.ellipse(b.mask, (b.W // 2, b.y0 - int(b.roof_h * 0.5)), (r, r), 0, 180, 360, 255, -1)
            cv2.ellipse(b.wall, (b.W // 2, b.y0 - int(b.roof_h * 0.5)), (r, r), 0, 180, 360,
                        jitter(rng, (120, 140, 110), 20), -1)
        cv2.rectangle(b.wall, (0, b.y0), (b.W, b.y0 + 14), b.trim, -1)
    else:
        cv2.rectangle(b.mask, (0, b.y0 - b.roof_h), (b.W - 1, b.y0), 255, -1)
        cv2.rectangle(b.wall, (0, b.y0 - b.roof_h), (b.W - 1, b.y0), b.trim, -1)
        if rng.random() < 0.6:  # a rooftop box
            bx = int(rng.integers(0, b.W // 2))
            cv2.rectangle(b.mask, (bx, b.y0 - b.roof_h - 50), (bx + b.W // 3, b.y0 - b.roof_h), 255, -1)
            cv2.rectangle(b.wall, (bx, b.y0 - b.roof_h - 50), (bx + b.W // 3, b.y0 - b.roof_h), b.dark, -1)


def _windows(b: _Building, rng: np.random.Generator) -> None:
    """Windows per floor and bay (their size kept for the side wall), a door in the middle bay."""
    b.win_w = int(b.bay_w * rng.uniform(0.38, 0.6))
    b.win_h = int(b.floor_h * rng.uniform(0.5, 0.72))
    for f in range(b.floors):
        fy = b.y0 + 20 + f * b.floor_h
        if b.family != "modern":
            cv2.line(b.wall, (0, fy - 6), (b.W, fy - 6), b.trim, int(rng.integers(3, 8)))
        for k in range(b.bays):
            bx = b.margin + k * b.bay_w
            if f == b.floors - 1 and k == b.bays // 2:
                dw, dh = int(b.bay_w * 0.7), int(b.floor_h * 0.85)
                _arch_window(b.wall, b.lights, bx + (b.bay_w - dw) // 2, b.H - dh, dw, dh, b.dark, b.trim,
                             b.family == "gothic", False)
                continue
            if b.family == "gothic" and f == 0 and k == b.bays // 2:
                continue  # the rose window
            if b.family == "modern":
                _glass_bay(b, rng, bx, fy)
                continue
            wx, wy = bx + (b.bay_w - b.win_w) // 2, fy + (b.floor_h - b.win_h) // 2
            _arch_window(b.wall, b.lights, wx, wy, b.win_w, b.win_h, b.glass, b.trim, b.family == "gothic",
                         b.family == "gothic")
            if b.family == "classical" and rng.random() < 0.85:
                tri = np.array([[wx - 6, wy - 2], [wx + b.win_w // 2, wy - 18], [wx + b.win_w + 6, wy - 2]], np.int32)
                cv2.fillPoly(b.wall, [tri], b.trim)


def _glass_bay(b: _Building, rng: np.random.Generator, bx: int, fy: int) -> None:
    """A modern bay: one pane of glass, its mullion and a reflection."""
    cv2.rectangle(b.wall, (bx + 4, fy), (bx + b.bay_w - 4, fy + b.floor_h - 14), b.glass, -1)
    cv2.rectangle(b.lights, (bx + 4, fy), (bx + b.bay_w - 4, fy + b.floor_h - 14), 255, -1)
    cv2.line(b.wall, (bx + b.bay_w // 2, fy), (bx + b.bay_w // 2, fy + b.floor_h - 14), b.trim, 2)
    refl = int(rng.integers(0, 60))
    cv2.line(b.wall, (bx + 8, fy + b.floor_h - 20), (bx + b.bay_w - 8, fy + 4),
             tuple(min(255, c + refl) for c in b.glass), 3)


def _ornaments(b: _Building, rng: np.random.Generator) -> None:
    """Unique ornaments: what lets a local matcher tell two buildings of a family apart; a
    gothic building may have a clock face."""
    for _ in range(int(rng.integers(4, 9))):
        ox, oy = int(rng.integers(b.margin, b.W - b.margin)), int(rng.integers(b.y0 + 10, b.H - 40))
        kind = int(rng.integers(4))
        col = jitter(rng, b.trim, 30)
        if kind == 0:
            r = int(rng.integers(8, 20))
            cv2.circle(b.wall, (ox, oy), r, col, -1)
            for k in range(8):
                a = k * math.pi / 4
                cv2.line(b.wall, (ox, oy), (int(ox + r * 1.5 * math.cos(a)), int(oy + r * 1.5 * math.sin(a))), b.dark,
                         2)
        elif kind == 1:
            text = "".join(chr(int(c)) for c in rng.integers(65, 91, int(rng.integers(3, 8))))
            cv2.putText(b.wall, text, (ox - 40, oy), cv2.FONT_HERSHEY_TRIPLEX, rng.uniform(0.6, 1.1), b.dark, 2,
                        cv2.LINE_AA)
        elif kind == 2:
            pts = (rng.random((5, 2)) * 34 - 17 + [ox, oy]).astype(np.int32)
            cv2.fillPoly(b.wall, [cv2.convexHull(pts)], col)
            cv2.polylines(b.wall, [cv2.convexHull(pts)], True, b.dark, 2)
        else:
            cv2.rectangle(b.wall, (ox - 14, oy - 22), (ox + 14, oy + 22), b.dark, -1)
            cv2.ellipse(b.wall, (ox, oy - 8), (7, 9), 0, 0, 360, col, -1)
            cv2.rectangle(b.wall, (ox - 8, oy), (ox + 8, oy + 20), col, -1)
    if b.family == "gothic" and rng.random() < 0.6:  # clock face
        c = (b.W // 2, b.y0 - int(b.roof_h * 0.25))
        cv2.circle(b.wall, c, 22, (230, 235, 235), -1)
        cv2.circle(b.wall, c, 22, b.dark, 2)
        a = rng.uniform(0, 2 * math.pi)
        cv2.line(b.wall, c, (int(c[0] + 16 * math.cos(a)), int(c[1] + 16 * math.sin(a))), b.dark, 2)


def _relief(b: _Building, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """What stands in front of the wall (→ parallax): buttresses, columns and a portico,
    balconies; its texture and its mask, left edges shaded so it reads as 3-D."""
    relief = np.zeros((b.H, b.W, 3), np.uint8)
    relief_mask = np.zeros((b.H, b.W), np.uint8)
    rel_col = np.clip(np.array(b.trim, np.float32) * rng.uniform(0.85, 1.05), 0, 255)
    rel_tex = np.clip(texture(rng, b.H, b.W, rel_col, "stone" if b.family != "modern" else "concrete"), 0,
                      255).astype(np.uint8)
    if b.family == "gothic":
        for k in range(b.bays + 1):
            x = b.margin + k * b.bay_w
            cv2.rectangle(relief_mask, (x - 9, b.y0 + 40), (x + 9, b.H - 1), 255, -1)
            pin = np.array([[x - 9, b.y0 + 40], [x, b.y0 - 10], [x + 9, b.y0 + 40]], np.int32)
            cv2.fillPoly(relief_mask, [pin], 255)
    elif b.family == "classical":
        n_col = int(rng.integers(4, 7))
        span = b.W - 2 * b.margin
        for k in range(n_col):
            x = int(b.margin + span * (k + 0.5) / n_col)
            cw = int(rng.integers(16, 26))
            cv2.rectangle(relief_mask, (x - cw // 2, b.y0 + 18), (x + cw // 2, b.H - 1), 255, -1)
            cv2.rectangle(relief_mask, (x - cw // 2 - 6, b.y0 + 10), (x + cw // 2 + 6, b.y0 + 22), 255, -1)
        cv2.rectangle(relief_mask, (b.margin - 10, b.y0), (b.W - b.margin + 10, b.y0 + 14), 255, -1)
    else:
        for f in range(1, b.floors, 2):
            fy = b.y0 + 20 + f * b.floor_h
            x1 = b.margin + int(rng.integers(0, 3)) * b.bay_w
            x2 = min(b.W - 1, x1 + int(rng.integers(2, 5)) * b.bay_w)
            cv2.rectangle(relief_mask, (x1, fy - 16), (x2, fy), 255, -1)
        cv2.rectangle(relief_mask, (b.W // 2 - b.bay_w, b.H - b.floor_h - 10),
                      (b.W // 2 + b.bay_w, b.H - b.floor_h + 6), 255, -1)
    relief[relief_mask > 0] = rel_tex[relief_mask > 0]
    edge = cv2.morphologyEx(relief_mask, cv2.MORPH_GRADIENT, np.ones((3, 3), np.uint8))
    relief[edge > 0] = (relief[edge > 0] * 0.6).astype(np.uint8)
    return relief, relief_mask


def _side(b: _Building, rng: np.random.Generator) -> np.ndarray:
    """The side wall: the same material, fewer windows."""
    D = int(b.W * rng.uniform(0.35, 0.6))
    side = np.clip(texture(rng, b.body_h, D, np.array(b.base) * 0.92, b.material), 0, 255).astype(np.uint8)
    n_side = max(1, D // b.bay_w)
    for f in range(b.floors):
        for k in range(n_side):
            wx = int((k + 0.5) * D / n_side - b.win_w / 2)
            wy = 20 + f * b.floor_h + (b.floor_h - b.win_h) // 2
            cv2.rectangle(side, (wx, wy), (wx + b.win_w, wy + b.win_h), b.glass, -1)
    return side
