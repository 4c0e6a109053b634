"""Benchmark of spatial verification (+SP) against ASMK's scoring, in the same run.

On ONE CPU (affinity; `--cpus N` for more), CPU seconds of this process. Images: the Flickr
size mix (`fixtures/flickr_sizes.py`, long side 1024) of synthetic photos; each query is a
crop of a database photo (scaled, as a query crop is), so half the pairs verified are true
matches and half unrelated. RootSIFT at the default 1,000 keypoints, an ASMK codebook
(`--codebook`, default 512, rsift-asmk's) learned on these images.
  asmk_us_per_pair:  the ASMK kernel (`asmk_similarity`) of every query against every
                     database image, per (query, image) pair: what score pays per candidate
                     and query.
  sp_ms_per_pair:    `mining.retrieval.spatial.verify` (tentative matches + RANSAC) per pair; split in
                     matching and RANSAC, and by true / unrelated pair.
  sp_s_per_query:    top_k (100) pairs: the +SP cost of one query's shortlist (twice per run
                     of score or evaluate: the database's top k and the candidates' top k).
  evidence_ms_per_candidate: MAX_IMAGES (20) pairs: the geometric evidence of one review
                     queue row (`mining.evidence`).
  sp_pair_over_asmk_pair: how many candidates ASMK scores in the time of one verification.
  keypoint_bytes_per_image: the `.geom.npz` a store keeps per image (geometry + uint8
                     descriptors + frame size), measured on these images.
Prints one JSON object. Usage: nice python -m benchmarks.spatial [--images 24] [--cpus 1]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from fixtures.flickr_sizes import describe_mix, photo, sizes
from mining.retrieval import spatial
from mining.evidence.geometry import MAX_IMAGES
from mining.methods import get_method
from mining.methods.rootsift import rootsift_features
from mining.methods.rsift_asmk import AsmkPayload, asmk_similarity, concat
from mining.stages.describe.stage import pin_numeric_threads, single_threaded_numerics


def _cpu() -> float:
    return time.process_time()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=24, help="database images (as many queries)")
    ap.add_argument("--codebook", type=int, default=512)
    ap.add_argument("--cpus", type=int, default=1)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[: args.cpus]))
    cv2.setNumThreads(1)
    with single_threaded_numerics():
        pin_numeric_threads()
        run(args)


def run(args: argparse.Namespace) -> None:
    shapes = sizes(args.images)
    db = [cv2.cvtColor(photo(100 + i, w, h), cv2.COLOR_RGB2GRAY) for i, (w, h) in enumerate(shapes)]
    queries = []
    for i, img in enumerate(db):  # a crop of the middle 60 %, at database scale
        h, w = img.shape
        queries.append(np.ascontiguousarray(img[h // 5: h - h // 5, w // 5: w - w // 5]))
    t = _cpu()
    feats_db = [rootsift_features(g, 1000) for g in db]
    feats_q = [rootsift_features(g, 1000) for g in queries]
    extract_ms = (_cpu() - t) / (len(db) + len(queries)) * 1e3
    kp_db = [spatial.pack(f.geometry, f.des, f.size) for f in feats_db]
    kp_q = [spatial.pack(f.geometry, f.des, f.size) for f in feats_q]
    with tempfile.TemporaryDirectory() as tmp:
        spatial.write_shard(Path(tmp), "00000", kp_db)
        geom_bytes = (Path(tmp) / f"00000{spatial.GEOM_SUFFIX}").stat().st_size / len(kp_db)

    asmk = get_method("rsift-asmk", {"codebook_size": args.codebook})
    asmk.fit([f.des for f in feats_db + feats_q], seed=0)
    q_method = get_method("rsift-asmk", {"codebook_size": args.codebook}, query=True)
    q_method.set_state(asmk.state)

    def payload(method, feats):  # noqa: ANN001, ANN202
        blocks = []
        for f in feats:
            w, b = method.aggregate(f.des)
            blocks.append(AsmkPayload(w, b, np.array([0, len(w)], np.int64)))
        return concat(blocks)
    pq, pd = payload(q_method, feats_q), payload(asmk, feats_db)
    t = _cpu()
    reps = 0
    while reps < 3 or _cpu() - t < 1.0:
        asmk_similarity(pq, pd, 3.0, 0.0)
        reps += 1
    asmk_us = (_cpu() - t) / reps / (pq.n * pd.n) * 1e6

    pairs = [(kp_q[i], kp_db[i], "true") for i in range(len(kp_q))]
    pairs += [(kp_q[i], kp_db[(i + 1) % len(kp_db)], "unrelated") for i in range(len(kp_q))]
    per: dict[str, list[float]] = {"true": [], "unrelated": []}
    match_s, inl = 0.0, {"true": [], "unrelated": []}
    for a, b, kind in pairs:
        t = _cpu()
        spatial.tentative_matches(a.des, b.des)
        match_s += _cpu() - t
        t = _cpu()
        n, _ = spatial.verify(a, b)
        per[kind].append(_cpu() - t)
        inl[kind].append(n)
    all_s = per["true"] + per["unrelated"]
    sp_ms = float(np.mean(all_s)) * 1e3
    out = {
        "images": f"{len(db)} database photos of the Flickr mix ({describe_mix()}), {len(queries)} query crops "
                  "(the middle 60 % of each)",
        "cpus": args.cpus, "codebook": args.codebook,
        "keypoints_per_image": round(float(np.mean([len(k.geometry) for k in kp_db])), 1),
        "keypoint_bytes_per_image": round(geom_bytes),
        "rootsift_ms_per_image": round(extract_ms, 2),
        "asmk_us_per_pair": round(asmk_us, 3),
        "sp_ms_per_pair": round(sp_ms, 3),
        "sp_ms_per_pair_true": round(float(np.mean(per["true"])) * 1e3, 3),
        "sp_ms_per_pair_unrelated": round(float(np.mean(per["unrelated"])) * 1e3, 3),
        "sp_matching_ms_per_pair": round(match_s / len(pairs) * 1e3, 3),
        "inliers_true_min": int(min(inl["true"])), "inliers_unrelated_max": int(max(inl["unrelated"])),
        "sp_s_per_query_top100": round(sp_ms * 100 / 1e3, 3),
        "evidence_ms_per_candidate": round(sp_ms * MAX_IMAGES, 2),
        "sp_pair_over_asmk_pair": round(sp_ms * 1e3 / asmk_us, 1),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
