"""Unrelated photo-like scenes for the demo world's candidates (landscape, street, interior, ...)."""

from __future__ import annotations

import cv2
import numpy as np

from mining.stages.demo.paint import VIEW_H, VIEW_W, finish, foreground, ground, jitter, noise, sky


SCENES = ("landscape", "seascape", "street", "interior", "objects", "people", "forest")


def _ridge(rng: np.random.Generator, w: int, base: float, amp: float) -> np.ndarray:
    n = noise(rng, 1, w, rng.uniform(40, 200), 4)[0]
    return base - amp * n


def render_scene(kind: str, rng: np.random.Generator, size: tuple[int, int] = (VIEW_W, VIEW_H)) -> np.ndarray:
    """A photo-like scene that contains no landmark (what most Flickr candidates look like)."""
    w, h = size if rng.random() > 0.15 else (size[1], size[0])
    yy, xx = np.mgrid[0:h, 0:w]
    night = bool(rng.random() < 0.1)
    draw = _DRAW.get(kind)
    if draw is None:  # people
        return _people(rng, w, h)
    img = draw(kind, rng, w, h, yy, xx, night)
    return finish(rng, img, float(rng.uniform(0, 1.0)), float(rng.uniform(0.8, 1.15)), float(rng.uniform(-0.08, 0.1)), night)


def _nature(kind: str, rng: np.random.Generator, w: int, h: int, yy: np.ndarray, xx: np.ndarray,
            night: bool) -> np.ndarray:
    """A landscape (ridges, a meadow), a seascape (waves, a beach) or a forest under a sky."""
    horizon = int(h * rng.uniform(0.35, 0.6))
    img = np.zeros((h, w, 3), np.float32)
    img[:] = sky(rng, h, w, night)
    if kind == "landscape":
        for layer in range(3):
            ridge = _ridge(rng, w, horizon + layer * h * 0.08, h * rng.uniform(0.1, 0.3) / (layer + 1))
            col = np.array(jitter(rng, (120 - layer * 30, 130 - layer * 20, 110 - layer * 30), 20), np.float32)
            m = yy > ridge[None, :]
            shade = 0.8 + 0.4 * noise(rng, h, w, 30, 3)
            img[m] = (col[None, None] * shade[..., None])[m]
        m = yy > horizon + h * 0.25
        img[m] = (np.array(jitter(rng, (60, 140, 90), 25), np.float32) * (0.7 + 0.6 * noise(rng, h, w, 6, 3))[..., None])[m]
    elif kind == "seascape":
        sea = np.array(jitter(rng, (140, 100, 40), 25), np.float32)
        waves = np.sin(yy * 0.35 + noise(rng, h, w, 30, 2) * 12) * 12
        m = yy > horizon
        img[m] = (sea[None, None] + waves[..., None])[m]
        beach = int(h * rng.uniform(0.75, 0.95))
        m2 = yy > beach + 20 * np.sin(xx / rng.uniform(60, 200))
        img[m2] = (np.array(jitter(rng, (150, 195, 215), 15), np.float32) * (0.85 + 0.3 * noise(rng, h, w, 4, 2))[..., None])[m2]
    else:
        img[yy > horizon] = np.array(jitter(rng, (40, 90, 50), 15), np.float32)
        for _ in range(int(rng.integers(10, 30))):
            x, y = int(rng.integers(0, w)), int(rng.integers(horizon, h + 200))
            s = (y - horizon + 60) / h
            cv2.rectangle(img, (x - int(6 * s * 3), y - int(300 * s)), (x + int(6 * s * 3), y), jitter(rng, (40, 60, 80), 10), -1)
            cv2.circle(img, (x, y - int(300 * s)), int(120 * s), jitter(rng, (50, 110, 60), 25), -1)
        img *= (0.75 + 0.5 * noise(rng, h, w, 8, 3))[..., None]
    return img


def _street(kind: str, rng: np.random.Generator, w: int, h: int, yy: np.ndarray, xx: np.ndarray,
            night: bool) -> np.ndarray:
    """A street whose road and rows of buildings converge to a vanishing point, people in front."""
    img = np.zeros((h, w, 3), np.float32)
    vx, vy = w * rng.uniform(0.35, 0.65), h * rng.uniform(0.35, 0.5)
    img[:] = sky(rng, h, w, night)
    road = np.array([[vx - 10, vy], [vx + 10, vy], [w * 1.2, h], [-w * 0.2, h]], np.int32)
    g = ground(rng, h, w, night)
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
            col = jitter(rng, (150, 160, 175), 45)
            cv2.fillPoly(img, [quad], col)
            for r in range(4):
                yl = int(lerp(quad[0, 1], quad[3, 1], (r + 0.5) / 5))
                cv2.line(img, (int(quad[0, 0]), yl), (int(quad[1, 0]), int(lerp(quad[1, 1], quad[2, 1], (r + 0.5) / 5))),
                         jitter(rng, (70, 70, 70), 20), int(rng.integers(3, 9)))
    img *= (0.85 + 0.3 * noise(rng, h, w, 10, 3))[..., None]
    occl = np.zeros((h, w), np.uint8)
    target = np.zeros((h, w), np.uint8)
    target[int(vy):, int(w * 0.2):int(w * 0.8)] = 255
    foreground(rng, img, occl, target, rng.uniform(0.05, 0.3), int(vy), night)
    return img


def _interior(kind: str, rng: np.random.Generator, w: int, h: int, yy: np.ndarray, xx: np.ndarray,
              night: bool) -> np.ndarray:
    """A room: walls, a floor in perspective, furniture and frames."""
    wall = np.array(jitter(rng, (190, 200, 210), 35), np.float32)
    img = np.broadcast_to(wall, (h, w, 3)).copy()
    x1, y1, x2, y2 = int(w * rng.uniform(0.25, 0.4)), int(h * rng.uniform(0.2, 0.35)), int(w * rng.uniform(0.6, 0.75)), int(h * rng.uniform(0.6, 0.75))
    floor = np.array([[x1, y2], [x2, y2], [w, h], [0, h]], np.int32)
    fcol = jitter(rng, (60, 100, 140), 30)
    cv2.fillPoly(img, [floor], fcol)
    for k in range(1, 10):
        cv2.line(img, (int(x1 + (x2 - x1) * k / 10), y2), (int(w * k / 10), h), tuple(c * 0.7 for c in fcol), 2)
    cv2.fillPoly(img, [np.array([[0, 0], [x1, y1], [x1, y2], [0, h]], np.int32)], tuple(float(c) * 0.85 for c in wall))
    cv2.fillPoly(img, [np.array([[w, 0], [x2, y1], [x2, y2], [w, h]], np.int32)], tuple(float(c) * 0.9 for c in wall))
    for _ in range(int(rng.integers(2, 6))):  # furniture and frames
        fx, fy = int(rng.integers(0, w - 100)), int(rng.integers(int(h * 0.3), h - 60))
        cv2.rectangle(img, (fx, fy), (fx + int(rng.integers(60, 300)), fy + int(rng.integers(40, 200))), jitter(rng, (80, 80, 100), 50), -1)
    for _ in range(int(rng.integers(1, 4))):
        fx, fy = int(rng.integers(x1, x2 - 60)), int(rng.integers(y1, y2 - 80))
        cv2.rectangle(img, (fx, fy), (fx + 60, fy + 80), (40, 60, 90), -1)
        cv2.rectangle(img, (fx + 5, fy + 5), (fx + 55, fy + 75), jitter(rng, (120, 140, 160), 60), -1)
    img *= (0.75 + 0.5 * noise(rng, h, w, 200, 2))[..., None]
    return img


def _objects(kind: str, rng: np.random.Generator, w: int, h: int, yy: np.ndarray, xx: np.ndarray,
             night: bool) -> np.ndarray:
    """Objects on a wooden table, seen from above."""
    img = np.array(jitter(rng, (60, 100, 150), 30), np.float32) * (0.8 + 0.4 * noise(rng, h, w, 5, 2))[..., None]
    img = np.broadcast_to(img, (h, w, 3)).copy() if img.ndim == 3 else img
    img[..., :] *= (0.9 + 0.2 * np.sin(xx / rng.uniform(5, 20)))[..., None]  # wood grain
    for _ in range(int(rng.integers(3, 8))):
        cx, cy, r = int(rng.integers(0, w)), int(rng.integers(0, h)), int(rng.integers(30, 160))
        cv2.ellipse(img, (cx + 10, cy + 12), (r, int(r * 0.7)), 0, 0, 360, (30, 40, 50), -1)
        cv2.ellipse(img, (cx, cy), (r, int(r * 0.7)), 0, 0, 360, jitter(rng, (128, 128, 128), 80), -1)
        cv2.ellipse(img, (cx - r // 4, cy - r // 5), (r // 4, r // 6), 0, 0, 360, (235, 235, 235), -1)
    img = cv2.GaussianBlur(img, (0, 0), 1.0)
    return img


def _people(rng: np.random.Generator, w: int, h: int) -> np.ndarray:
    """People in front of a blurred street, landscape or interior (finished here)."""
    img = cv2.GaussianBlur(render_scene(("street", "landscape", "interior")[int(rng.integers(3))], rng, (w, h)).astype(np.float32), (0, 0), 6)
    for _ in range(int(rng.integers(1, 5))):
        px, py, s = int(rng.integers(0, w)), int(h * rng.uniform(0.3, 0.6)), rng.uniform(0.6, 1.4)
        cv2.ellipse(img, (px, int(py + 230 * s)), (int(110 * s), int(170 * s)), 0, 0, 360, jitter(rng, (90, 60, 60), 60), -1)
        cv2.ellipse(img, (px, py), (int(55 * s), int(70 * s)), 0, 0, 360, jitter(rng, (140, 170, 210), 30), -1)
        cv2.ellipse(img, (px, int(py - 40 * s)), (int(58 * s), int(40 * s)), 0, 180, 360, jitter(rng, (30, 40, 60), 20), -1)
    return finish(rng, img, 0.0, float(rng.uniform(0.9, 1.1)), 0.0, False)


_DRAW = {"landscape": _nature, "seascape": _nature, "forest": _nature, "street": _street, "interior": _interior,
         "objects": _objects}
