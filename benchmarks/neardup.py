"""Near-duplicate thresholds, measured on the demo world's planted bursts and re-uploads.

Usage: python benchmarks/neardup.py --world WORLD [--work DIR] [--method cnn-gem]
WORLD is a `mining demo build` output (tiny or small). The candidates are laid out as a
download folder (every image `ok`), described with the method (in-process), and
`mining neardup` runs with the default thresholds. Prints JSON: the dHash distance and
cosine of every planted pair (burst copy → its source, re-upload → its landmark image) next
to the closest unplanted pairs (the margins the thresholds sit in), and precision / recall of
the groups and of the landmark copies (mining.stages.neardup.stage.measure).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from mining.settings import options
from mining.compute.cluster import Cluster
from mining.retrieval.methodstores import unit_rows
from mining.stages.demo.world import as_download_folder
from mining.stages.neardup import stage as neardup


def main() -> None:
    from mining.settings.options import defaults
    from mining.stages.describe import stage as describe

    DESCRIBE = defaults("describe")
    from mining.retrieval.descriptors import open_store
    from mining.datasets.landmarks import load_landmarks

    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/neardup-bench"))
    ap.add_argument("--method", default="cnn-gem")
    args = ap.parse_args()
    world, work = args.world, args.work
    images, desc = work / "images", work / "desc" / args.method
    as_download_folder(world, images)
    gnd = world / "landmarks" / "gnd_demo.pkl"
    if not (desc / "candidates" / "store.json").is_file():
        describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=[args.method],
                     out=desc / "candidates", options=DESCRIBE, cluster=Cluster(workers=0))
    for part in ("queries", "database"):
        if not (desc / part / "store.json").is_file():
            describe.run(inputs=describe.Inputs(images=gnd, image_set=part, models=desc / "candidates"),
                         methods=[args.method], out=desc / part, options=DESCRIBE, cluster=Cluster(workers=0))
    stats = neardup.run(images=images, landmarks=gnd, descriptors=desc, out=work / "neardup",
                        options=options.defaults("neardup"))
    table = pq.read_table(work / "neardup" / "neardup.parquet").to_pandas()
    truth = pq.read_table(world / "truth.parquet").to_pandas()
    result = {"world": json.loads((world / "world.json").read_text())["counts"]["near_duplicates"],
              "thresholds": stats["thresholds"], "measured": neardup.measure(table, truth)}
    # the margins: planted pairs vs the closest unplanted ones
    ids, c_payload = open_store(desc / "candidates").load_all()
    vec = unit_rows(c_payload)
    pid = np.array([int(i) for i in ids])
    row = {p: i for i, p in enumerate(pid.tolist())}
    h = dict(zip(table.photo_id.tolist(), table.dhash.to_numpy().view(np.uint64).tolist()))
    hashes = np.array([h[p] for p in pid.tolist()], np.uint64)
    sims = vec @ vec.T
    dist = neardup.hamming(hashes[:, None], hashes[None, :])
    planted = np.zeros(sims.shape, bool)
    for p, c in zip(truth.photo_id, truth.copy_of):
        if isinstance(c, str) and c.startswith("photo:") and p in row and int(c[6:]) in row:
            planted[row[p], row[int(c[6:])]] = planted[row[int(c[6:])], row[p]] = True
    same_group = planted.copy()
    for i in range(len(pid)):  # two copies of one source are a planted pair too
        same_group[i] |= planted[planted[i]].any(axis=0) if planted[i].any() else False
    np.fill_diagonal(same_group, True)
    other = ~same_group
    iu = np.triu_indices(len(pid), 1)
    result["candidate_pairs"] = {
        "planted": [{"cosine": round(float(sims[i, j]), 4), "hash_distance": int(dist[i, j])}
                    for i, j in zip(*iu) if same_group[i, j]],
        "unplanted_max_cosine": round(float(sims[other].max()), 4),
        "unplanted_min_hash_distance": int(dist[other].min()),
        "unplanted_within_hash_10": int((dist[iu][other[iu]] <= 10).sum()),
        "unplanted_both_within": int(((dist[iu] <= stats["thresholds"]["max_hash_distance"])
                                      & (sims[iu] >= stats["thresholds"]["min_cosine"]) & other[iu]).sum()),
    }
    ds = load_landmarks(gnd)
    lm = {}
    for part in ("queries", "database"):
        lids, payload = open_store(desc / part).load_all()
        lm.update({n: v for n, v in zip(lids, unit_rows(payload))})
    lm_names = list(lm)
    lm_vec = np.stack([lm[n] for n in lm_names])
    lm_hash, _ = neardup.hash_files([ds.image_path(n) for n in lm_names])
    s2 = vec @ lm_vec.T
    d2 = neardup.hamming(hashes[:, None], lm_hash[None, :])
    copies = np.zeros(s2.shape, bool)
    for p, c in zip(truth.photo_id, truth.copy_of):
        if isinstance(c, str) and not c.startswith("photo:") and p in row:
            copies[row[p], lm_names.index(c)] = True
    result["landmark_pairs"] = {
        "planted": [{"cosine": round(float(s2[i, j]), 4), "hash_distance": int(d2[i, j])} for i, j in zip(*np.nonzero(copies))],
        "unplanted_min_hash_distance": int(d2[~copies].min()),
        "unplanted_max_cosine_within_hash_20": round(float(s2[~copies & (d2 <= 20)].max()), 4) if (~copies & (d2 <= 20)).any() else None,
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
