"""CPU per image of RootSIFT's shared pass (rsift-asmk + rsift-vlad: one decode, one SIFT
extraction, two aggregations) on the Flickr size mix (`fixtures.flickr_sizes`), against
OpenCV's bare SIFT (`detectAndCompute` with the stage's detector) on the same decoded images,
measured in the same run, so the stage's overhead over the extraction it cannot avoid shows
as a ratio.

N synthetic photos in the mix's shapes are written as q90 JPEGs into a download folder; the
methods' states are learned once; then `benchmarks.describe.bench_shared` measures, least of
--repeat, interleaved: the two-method `describe` pass in-process (stage), one RootSIFT and
both aggregations on decoded images (bare), SIFT alone, RootSIFT alone and the stage's gray
decode. CPU seconds of this process on one CPU (affinity). `per_image`: the same three,
interleaved image by image (least of --repeat per image), which a machine whose load comes and
goes skews far less than whole passes: the RootSIFT transform's and the decode's share over
bare SIFT.

    nice python -m benchmarks.rootsift_pass [--images 24] [--repeat 2]
Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import cv2
import numpy as np

from mining.photos import imageindex
from mining.settings import layout
from mining.methods.rootsift import _sift, rootsift
from mining.stages.describe.stage import list_items, load_image, pin_numeric_threads, single_threaded_numerics
from benchmarks.describe import _timed, bench_shared
from fixtures.flickr_sizes import describe_mix, photo, sizes


def make_mix_folder(root: Path, n: int) -> None:
    """n q90 JPEGs in the mix's shapes (photo id i has the i-th shape of `sizes(n)`)."""
    ids = list(range(1, n + 1))
    for pid, (w, h) in zip(ids, sizes(n)):
        p = root / layout.image_relpath(pid)
        p.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(p), photo(pid, w, h), [cv2.IMWRITE_JPEG_QUALITY, 90])
    imageindex.write(root, [{"photo_id": pid, "status": "ok", "path": layout.image_relpath(pid)} for pid in ids])


def per_image(images: Path, cap: int, repeat: int) -> dict[str, object]:
    """ms per image of bare SIFT, `rootsift` and the stage's gray decode, interleaved."""
    items = list_items(images, "candidates")
    t = {"sift_alone": 0.0, "rootsift": 0.0, "decode": 0.0}
    for it in items:
        gray = load_image(it.path, 1024, "L")
        runs = {"sift_alone": lambda: _sift(cap).detectAndCompute(np.ascontiguousarray(gray), None),
                "rootsift": lambda: rootsift(gray, cap), "decode": lambda: load_image(it.path, 1024, "L")}
        best = {k: min(_timed(f) for _ in range(repeat)) for k, f in runs.items()}
        for k, v in best.items():
            t[k] += v
    n = len(items)
    return {"ms_per_image": {k: round(1000 * v / n, 1) for k, v in t.items()},
            "ratio_rootsift_to_sift_alone": round(t["rootsift"] / t["sift_alone"], 3),
            "ratio_decode_plus_rootsift_to_sift_alone": round((t["decode"] + t["rootsift"]) / t["sift_alone"], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--shard-size", type=int, default=8)
    args = ap.parse_args()
    cpu = sorted(os.sched_getaffinity(0))[0]
    os.sched_setaffinity(0, {cpu})  # before any pool starts: per-core CPU seconds
    cv2.setNumThreads(1)
    out: dict[str, object] = {"input_px": f"Flickr mix ({describe_mix()}) JPEG q90", "images": args.images,
                              "cpus": 1, "repeat": args.repeat, "load_average_start": os.getloadavg(),
                              "note": "ms_per_image and *_s in CPU seconds of this process; "
                                      "ratio_stage_to_sift_alone: the whole two-method pass over bare SIFT"}
    with tempfile.TemporaryDirectory() as tmp, single_threaded_numerics():
        pin_numeric_threads()
        root = Path(tmp)
        make_mix_folder(root / "images", args.images)
        out["shared_rootsift"] = bench_shared(["rsift-asmk", "rsift-vlad"], root / "images", root,
                                              args.shard_size, args.repeat)
        out["per_image"] = per_image(root / "images", 1000, max(2, args.repeat))
    out["load_average_end"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
