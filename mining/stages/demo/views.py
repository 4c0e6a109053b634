"""Views of a façade through a real camera model (the building mask is warped, so viewpoint
changes cause parallax), and the recipes that make a view Easy, Hard or a distractor."""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from mining.stages.demo.facade import Facade
from mining.stages.demo.paint import VIEW_H, VIEW_W, blend, finish, foreground, ground, jitter, noise, sky, texture


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


def _generic_building(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A plain neighbour: a box with a window grid (surroundings that change between photos)."""
    h, w = int(rng.integers(250, 600)), int(rng.integers(200, 450))
    base = jitter(rng, (150, 160, 175), 45)
    img = texture(rng, h, w, base, ("plaster", "brick", "concrete")[int(rng.integers(3))])
    img = np.clip(img, 0, 255).astype(np.uint8)
    lights = np.zeros((h, w), np.uint8)
    ww, wh = int(rng.integers(22, 45)), int(rng.integers(30, 55))
    gx, gy = ww + int(rng.integers(15, 40)), wh + int(rng.integers(20, 40))
    glass = jitter(rng, (80, 70, 60), 20)
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
    blend(canvas[y:y + bh, x:x + bw], warped, wm[y:y + bh, x:x + bw])
    np.maximum(alpha_acc, wm, out=alpha_acc)
    return wm


@dataclass(frozen=True)
class _Camera:
    """The photo's camera on a façade of Wf × Hf px (its plane z=0, x centred, y up from the
    ground), scaled and shifted so the building has the view's width and position."""

    R: np.ndarray
    cam: np.ndarray
    f: float
    off: np.ndarray
    Wf: int
    Hf: int

    def plane(self, z: float) -> np.ndarray:
        """The façade's corners, on the plane at depth z."""
        u, v = np.array([0, self.Wf, self.Wf, 0], np.float64), np.array([0, 0, self.Hf, self.Hf], np.float64)
        return np.stack([u - self.Wf / 2, self.Hf - v, np.broadcast_to(z, u.shape)], axis=1).astype(np.float64)

    def to_img(self, P: np.ndarray) -> np.ndarray:
        return (_project(P, self.R, self.cam) * self.f + self.off).astype(np.float32)

    def homography(self, src_w: int, src_h: int, P: np.ndarray) -> np.ndarray:
        src = np.array([[0, 0], [src_w, 0], [src_w, src_h], [0, src_h]], np.float32)
        return cv2.getPerspectiveTransform(src, self.to_img(P))


def _camera(fac: Facade, p: ViewParams, w: int, h: int) -> _Camera:
    """The camera on a circle at distance 2.2 façade widths, at the view's yaw, pitch and roll."""
    Hf, Wf = fac.wall.shape[:2]
    d = Wf * 2.2
    yaw, pitch = math.radians(p.yaw_deg), math.radians(p.pitch_deg)
    target = np.array([0.0, Hf * 0.45, 0.0])
    cam = np.array([d * math.sin(yaw), 160.0, -d * math.cos(yaw)])
    cam[1] = target[1] - d * math.tan(pitch) if p.pitch_deg else cam[1]
    R = _look_at(cam, target, math.radians(p.roll_deg))
    front = _project(_Camera(R, cam, 1.0, np.zeros(2), Wf, Hf).plane(0.0), R, cam)
    span = front[:, 0].max() - front[:, 0].min()
    f = p.width_frac * w / max(span, 1e-9)
    off = np.array([p.cx_frac * w, p.cy_frac * h]) - front.mean(axis=0) * f
    return _Camera(R, cam, f, off, Wf, Hf)


def render_view(fac: Facade, p: ViewParams, rng: np.random.Generator,
                size: tuple[int, int] = (VIEW_W, VIEW_H)) -> tuple[np.ndarray, tuple[float, float, float, float] | None]:
    """Photograph façade `fac` with camera `p`; return the image and the building's bbox (None if off-frame)."""
    w, h = (size[1], size[0]) if p.portrait else size
    c = _camera(fac, p, w, h)
    ground_pts = c.to_img(np.array([[-5 * c.Wf, 0, 0], [5 * c.Wf, 0, 0]], np.float64))
    ground_y = int(np.clip(ground_pts[:, 1].mean(), 0, h - 1))
    canvas = np.zeros((h, w, 3), np.float32)
    canvas[:ground_y] = sky(rng, max(ground_y, 1), w, p.night)[:ground_y]
    canvas[ground_y:] = ground(rng, h - ground_y, w, p.night)
    alpha = np.zeros((h, w), np.uint8)
    lights_img = np.zeros((h, w), np.uint8)
    # Neighbours (different each photo), then the side wall, the wall, and the relief in front.
    if p.neighbours:
        lights_img = _neighbours(canvas, lights_img, c, rng)
    building, lights_img = _facade_layers(canvas, alpha, lights_img, fac, p, c, rng)
    if p.night:
        canvas = _at_night(canvas, lights_img, building, rng)
    occl = np.zeros((h, w), np.uint8)
    foreground(rng, canvas, occl, building, p.occlusion, ground_y, p.night)
    img = finish(rng, canvas, p.blur, p.gain, p.warmth, p.night)
    visible = building > 127
    if not visible.any():
        return img, None
    ys, xs = np.nonzero(visible)
    return img, (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))


def _neighbours(canvas: np.ndarray, lights_img: np.ndarray, c: _Camera, rng: np.random.Generator) -> np.ndarray:
    """A generic building on each side of the façade, drawn onto the canvas; the lights with theirs."""
    h, w = canvas.shape[:2]
    for sgn in (-1, 1):
        gap = c.Wf * rng.uniform(0.05, 0.5)
        nb, nl = _generic_building(rng)
        nh, nw = nb.shape[:2]
        x0 = c.Wf / 2 + gap if sgn > 0 else -c.Wf / 2 - gap - nw
        z0 = rng.uniform(-0.3, 1.0) * c.Wf
        P = np.array([[x0, nh, z0], [x0 + nw, nh, z0], [x0 + nw, 0, z0], [x0, 0, z0]], np.float64)
        Hn = c.homography(nw, nh, P)
        lights_img = np.maximum(lights_img, cv2.warpPerspective(nl, Hn, (w, h)))
        _warp_onto(canvas, np.zeros((h, w), np.uint8), nb, None, Hn)
    return lights_img


def _facade_layers(canvas: np.ndarray, alpha: np.ndarray, lights_img: np.ndarray, fac: Facade, p: ViewParams,
                   c: _Camera, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The side wall, the wall (lit from one side by day) and the relief in front, drawn onto
    the canvas; the building's mask in the image, and the lights with the wall's."""
    h, w = canvas.shape[:2]
    sh, sw = fac.side.shape[:2]
    sx = c.Wf / 2 if p.yaw_deg > 0 else -c.Wf / 2
    side_P = np.array([[sx, sh, 0], [sx, sh, sw], [sx, 0, sw], [sx, 0, 0]], np.float64)
    if p.yaw_deg < 0:
        side_P = side_P[[1, 0, 3, 2]]
    if abs(p.yaw_deg) > 4:
        shade = 0.75 if p.yaw_deg > 0 else 0.85
        _warp_onto(canvas, alpha, (fac.side * shade).astype(np.uint8), None, c.homography(sw, sh, side_P))
    Hw = c.homography(c.Wf, c.Hf, c.plane(0.0))
    wall = fac.wall
    if not p.night:  # sun from one side: a soft horizontal ramp across the façade
        ramp = np.linspace(rng.uniform(0.75, 1.1), rng.uniform(0.75, 1.1), c.Wf, dtype=np.float32)[None, :, None]
        wall = np.clip(wall * ramp, 0, 255).astype(np.uint8)
    wm = _warp_onto(canvas, alpha, wall, fac.mask, Hw)
    lights_img = np.maximum(lights_img, cv2.warpPerspective(fac.lights, Hw, (w, h)))
    Hr = c.homography(c.Wf, c.Hf, c.plane(-0.07 * c.Wf))
    rm = _warp_onto(canvas, alpha, fac.relief, fac.relief_mask, Hr)
    return np.maximum(wm, rm), lights_img


def _at_night(canvas: np.ndarray, lights_img: np.ndarray, building: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The canvas by night: dark and blue, some windows lit, the building floodlit or not."""
    h, w = canvas.shape[:2]
    floodlit = rng.random() < 0.5
    canvas *= 0.18
    canvas[..., 0] *= 1.3
    glow = (lights_img.astype(np.float32) / 255.0)[..., None] * (rng.random() < 0.5 or 1.0)
    lit = np.array(jitter(rng, (90, 200, 245), 15), np.float32)
    on = (noise(rng, h, w, 40, 1) > 0.45).astype(np.float32)[..., None]
    canvas = canvas * (1 - glow * on) + lit * glow * on
    if floodlit:
        bm = (building.astype(np.float32) / 255)[..., None]
        grad = np.linspace(0.6, 1.6, h, dtype=np.float32)[:, None, None]
        canvas = canvas * (1 + bm * grad * 1.5)
        canvas[..., 2] += (bm[..., 0] * 25)
    return canvas


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
