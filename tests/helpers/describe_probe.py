"""Describe images with each shipped method as the describe stage does (the run's settings and
learned state: codebooks, PCA) and print a digest of every output's bytes per method, as JSON.

Run as a script, so that the same code runs natively and under an emulated CPU
(tests/workflow/test_any_cpu.py): `python describe_probe.py DESCRIPTORS MAX_SIDE IMAGE...`,
DESCRIPTORS being a run's descriptors/ folder (each method's candidates store); MAX_SIDE > 0
describes at that size instead of the run's (cheaper under emulation), 0 keeps the run's."""

from __future__ import annotations

import hashlib
import json
import sys

import mining  # noqa: F401 - first: the pins (mining/pins.py), as the CLI has them


def digest(x: object, h: "hashlib._Hash") -> None:
    import numpy as np

    if isinstance(x, np.ndarray):
        h.update(str(x.dtype).encode() + str(x.shape).encode() + np.ascontiguousarray(x).tobytes())
    elif isinstance(x, (tuple, list)):
        for v in x:
            digest(v, h)
    elif isinstance(x, dict):
        for k in sorted(x):
            digest(x[k], h)
    else:
        h.update(repr(x).encode())


def main(descriptors: str, max_side: int, images: list[str]) -> dict[str, str]:
    import cv2
    import numpy as np

    from mining import pins
    from mining.methods.base import get_method
    from mining.photos.imagedecode import load_image

    cv2.setNumThreads(1)  # as describe's workers (mining.stages.describe.stage)
    pins.check("describe probe")
    out = {}
    for name in ("cnn-gem", "rsift-asmk", "rsift-vlad"):
        store = f"{descriptors}/{name}/candidates"
        with open(f"{store}/store.json") as f:
            params = dict(json.load(f)["params"])
        if max_side:
            params["max_side"] = max_side
        method = get_method(name, params)
        with np.load(f"{store}/model.npz") as z:
            method.set_state({k: z[k] for k in z.files})
        h = hashlib.sha256()
        for path in images:
            digest(method.describe_extracted(method.extract(load_image(path, method.max_side, method.mode))), h)
        out[name] = h.hexdigest()
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])))
