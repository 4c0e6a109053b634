"""The bill: core-hours per stage for R1M and for a 100M-candidate pool, before and after, from
the benchmarks' JSON.

Usage: python -m benchmarks.bill --scale SCALE.json --neardup NEARDUP.json [--describe DESCRIBE.json]
       [--describe-mix MIX.json] [--json]

SCALE.json: `benchmarks.scale` output (or `--merge` of several): every stage but near-duplicates
and the face check, with R1M and 100M projections (extraction's per-image figures are
before issue 31: torch cnn-gem, one RootSIFT extraction per method). Its `same_run_ratios`
(cnn-gem ONNX Runtime over torch, the shared RootSIFT pass over separate ones, from
`benchmarks/describe.py`) turn them into today's; DESCRIBE.json (a `benchmarks/describe.py`
run with both RootSIFT methods), when given, replaces the shared pass's ratio with its own.
MIX.json (`benchmarks.describe_mix` output), when given, gives cnn-gem's ratio instead: torch's
CPU over ONNX Runtime's for whole describe processes on the Flickr size mix (the same run).
NEARDUP.json: `benchmarks.neardup_index` output (the index at 1M and all pairs in the same run).
Prints markdown: one table per stage (today's figure, the reference, their ratio, the command),
then per stage its growth, memory bound and what breaks first at 100M.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

SCALE_CMD = "python -m benchmarks.scale --out scale.json (stages: --only)"
DESCRIBE_CMD = "python benchmarks/describe.py"
MIX_CMD = "python -m benchmarks.describe_mix"
NEARDUP_CMD = "python -m benchmarks.neardup_index --out neardup.json"
FACES_CMD = "python benchmarks/release_faces.py"

# per stage: (growth, memory bound, what breaks first at 100M, what would cut it)
NOTES = {
    "ingest+geofilter": ("linear in rows (b 0.45 at ≤ 1M: start-up)", "~1.5 GB (blocks in flight)",
                         "nothing: YFCC100M is 100M rows for R1M too", ""),
    "score (70 queries × 3 methods)": ("linear in candidates", "~1.2 GB (threads × 2,048 × queries)",
                                       "descriptor stores on disk: 100M × 512 × 2 B = 102 GB per global method", ""),
    "select + ATTRIBUTION": ("linear in N", "~2.5 kB per selected photo: 11.7 GB at N = 24.4M",
                             "memory: pandas rows with Python strings for the attribution", ""),
    "evaluate (70 queries × 3 methods)": ("linear in the pool", "~0.7 GB", "nothing before 100M", ""),
    "review import": ("linear in the queue (not the pool)", "0.22 GB", "nothing", ""),
    "report": ("linear in the pool", "~0.8–1.6 GB", "nothing", ""),
    "extract cnn-gem": ("linear in images", "0.82 GB per worker (ONNX Runtime sessions)", "core-hours",
                        "batching same-size images, int8 weights (both change bytes: a new checksum), or a GPU "
                        "(ONNX Runtime's CUDA provider)"),
    "extract rsift (shared pass)": ("linear in images", "0.55 GB per worker", "core-hours; ASMK's store ~9 KB per image: 0.9 TB",
                                    "fewer keypoints (max_features) or SIFT on a GPU: both change the features"),
    "near-duplicates": ("b = 2.0 measured from 300k to 1M: the index's probes grow slower, but the cosines of the pairs "
                        "within 10 bits grow as n² × their share (40 per million random pairs in the benchmark's hashes)",
                        "descriptors as stored, 2 B × dim per candidate: 4.2 GB at R1M, 102 GB at 100M",
                        "memory: 102 GB of float16 rows in one process",
                        "rows read from the store per pair (memory-mapped shards) instead of held; the cosines of a "
                        "pile of equal hashes as one GEMM"),
    "release face check": ("linear in N selected", "one image per thread", "core-hours (24.4M images at N = 24.4M)",
                           "a GPU; not a downscaled copy: at 0.9-0.5 of the size it loses faces found at full "
                           "size, for at most 22 % less CPU (benchmarks/release_faces.py --mix)"),
}


def interpolate(points: list[tuple[float, float]], size: float) -> float | None:
    """Cost at `size` on the measured curve: log-log between the two measured points around it;
    past the largest as `benchmarks.scale.project` (never below linear); below the smallest on
    the straight line (a fixed cost plus a cost per unit) through the two smallest, the fixed
    cost being what a small run mostly pays."""
    import math

    from benchmarks.scale import project

    pts = sorted((s, c) for s, c in points if s > 0 and c and c > 0)
    if not pts:
        return None
    if size >= pts[-1][0] or len(pts) == 1:
        return project(pts, size) if size >= pts[-1][0] else pts[0][1]
    lo = max(i for i, (s, _) in enumerate(pts[:-1]) if s <= size) if size >= pts[0][0] else 0
    (s0, c0), (s1, c1) = pts[lo], pts[lo + 1]
    if size < s0:
        per_unit = max(0.0, (c1 - c0) / (s1 - s0))
        return max(c0 - per_unit * s0, 0.0) + per_unit * size
    return c0 * (size / s0) ** (math.log(c1 / c0) / math.log(s1 / s0))


def per_image(scale: dict[str, Any], describe: dict[str, Any] | None = None,
              mix: dict[str, Any] | None = None) -> dict[str, float]:
    """Today's extraction CPU seconds per image, as the bill has them: the reference path's
    figure divided by the same-run ratio (cnn-gem; the shared RootSIFT pass of both methods)."""
    ratios = scale.get("same_run_ratios", {})
    onnx = mix["process"]["torch_over_onnx"] if mix else min(ratios.get("cnn_gem_onnx_over_torch_images_per_cpu_s", [1.0]))
    shared = ratios.get("rsift_shared_pass_over_separate", 1.0)
    if describe and "shared_rootsift" in describe:
        shared = describe["shared_rootsift"]["speedup"]
    ex = scale["extract"]
    return {"cnn-gem": ex["cnn-gem"]["cpu_s_per_image"] / onnx,
            "rsift (shared pass)": (ex["rsift-asmk"]["cpu_s_per_image"] + ex["rsift-vlad"]["cpu_s_per_image"]) / shared}


def at_sizes(scale: dict[str, Any], nd: dict[str, Any], sizes: dict[str, float], describe: dict[str, Any] | None = None,
             mix: dict[str, Any] | None = None) -> dict[str, float | None]:
    """CPU seconds per stage that the bill's figures give for a run of `sizes` (keys: rows,
    candidates, landmark_images, queries, selected, review_items): the measured curves of
    SCALE.json at those sizes (`interpolate`), score at candidates × queries / 70, extraction and
    the face check per image, near-duplicates from NEARDUP.json's per-image rates."""
    from benchmarks.scale import stage_cpu

    def curve(key: str, size_key: str, size: float) -> float | None:
        rows = scale.get(key) or []
        return interpolate([(r[size_key], stage_cpu(r)) for r in rows], size)

    img = per_image(scale, describe, mix)
    n, sel = sizes["candidates"], sizes["selected"]
    face = scale.get("release_faces_cpu_s_per_image", {}).get("mean")
    return {
        "ingest+geofilter": curve("ingest_geofilter", "rows", sizes["rows"]),
        "extract cnn-gem": img["cnn-gem"] * n,
        "extract rsift (shared pass)": img["rsift (shared pass)"] * n,
        "extract cnn-gem, landmark images": img["cnn-gem"] * sizes["landmark_images"],
        "extract rsift (shared pass), landmark images": img["rsift (shared pass)"] * sizes["landmark_images"],
        "near-duplicates": (nd["hash_cpu_s_per_image"] + nd["landmark_cpu_s_per_candidate"]) * n,
        "score (70 queries × 3 methods)": curve("score", "candidates", n * sizes["queries"] / 70),
        "review import": curve("review_import", "items", sizes["review_items"]),
        "select + ATTRIBUTION": curve("select", "n", sel),
        "evaluate (70 queries × 3 methods)": curve("evaluate", "n", sel),
        "release face check": face * sel if face else None,
        "report": curve("report", "n", sel),
    }


def _num(v: float | None) -> str:
    return "–" if v is None else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}")


def bill(scale: dict[str, Any], nd: dict[str, Any], describe: dict[str, Any] | None = None,
         mix: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Per stage: {r1m|p100m: (after, before)} core-hours and the command."""
    from benchmarks.scale import P100M, R1M, summary

    summ = scale.get("summary") or summary(scale)
    ratios = scale.get("same_run_ratios", {})
    onnx = min(ratios.get("cnn_gem_onnx_over_torch_images_per_cpu_s", [1.0]))
    shared = ratios.get("rsift_shared_pass_over_separate", 1.0)
    if describe and "shared_rootsift" in describe:
        shared = describe["shared_rootsift"]["speedup"]
    out: dict[str, dict[str, Any]] = {}
    for name, s in summ.items():
        if "sizes" in s and name in NOTES:
            out[name] = {"r1m": (s["r1m_core_hours"], s["r1m_core_hours"]), "p100m": (s["p100m_core_hours"], s["p100m_core_hours"]),
                         "command": SCALE_CMD, "reference": "same figure (unchanged)"}
    cnn = summ["extract cnn-gem"]
    out["extract cnn-gem"] = {k: (cnn[f"{k}_core_hours"] / onnx, cnn[f"{k}_core_hours"]) for k in ("r1m", "p100m")}
    out["extract cnn-gem"].update(command=f"{DESCRIBE_CMD} --methods cnn-gem; {SCALE_CMD}",
                                  reference=f"torch (ONNX Runtime: {onnx}× the images per CPU s, least of the same-run ratios)")
    if mix:  # the same-run ratio of whole processes on the size mix replaces the 768x576 one
        onnx = mix["process"]["torch_over_onnx"]
        out["extract cnn-gem"] = {k: (cnn[f"{k}_core_hours"] / onnx, cnn[f"{k}_core_hours"]) for k in ("r1m", "p100m")}
        out["extract cnn-gem"].update(command=f"{MIX_CMD}; {SCALE_CMD}", reference=(
            f"torch (ONNX Runtime: {onnx}× the images per CPU s, whole describe processes on the Flickr size mix, "
            f"{mix['process']['images']} images, least of each backend's repeats)"))
    sep = {k: summ["extract rsift-asmk"][f"{k}_core_hours"] + summ["extract rsift-vlad"][f"{k}_core_hours"] for k in ("r1m", "p100m")}
    out["extract rsift (shared pass)"] = {k: (sep[k] / shared, sep[k]) for k in sep}
    out["extract rsift (shared pass)"].update(command=f"{DESCRIBE_CMD} --methods rsift-asmk,rsift-vlad",
                                              reference=f"one extraction per method (the shared pass: {shared}×, same run)")
    p = nd["projection"]
    out["near-duplicates"] = {k: (p[j]["core_hours"], p[j]["all_pairs_core_hours"] + p[j]["hash_core_hours"] + p[j]["landmark_core_hours"])
                              for k, j in (("r1m", "r1m"), ("p100m", "ilias_100m"))}
    out["near-duplicates"].update(command=NEARDUP_CMD, reference="all pairs (float32 GEMM tiles), rate from the same run")
    face = scale.get("release_faces_cpu_s_per_image", {}).get("mean")
    if face:
        fh = {k: face * v["selected"] / 3600 for k, v in (("r1m", R1M), ("p100m", P100M))}
        out["release face check"] = {k: (fh[k], fh[k]) for k in fh}
        out["release face check"].update(command=FACES_CMD, reference="same figure (unchanged)")
    return out


def markdown(b: dict[str, dict[str, Any]]) -> str:
    lines = []
    tot = {k: [sum(v[k][0] for v in b.values()), sum(v[k][1] for v in b.values())] for k in ("r1m", "p100m")}
    for name, v in b.items():
        lines += [f"#### {name}", "", "| pool | core-hours today | reference (before) | ratio | command |", "|---|---|---|---|---|"]
        for k, label in (("r1m", "R1M (4.1M candidates)"), ("p100m", "100M candidates")):
            after, before = v[k]
            ratio = before / after if after else None
            lines.append(f"| {label} | {_num(after)} | {_num(before)}: {v['reference']} | {_num(ratio)} | `{v['command']}` |")
        g, mem, breaks, cut = NOTES[name]
        share = v["r1m"][0] / tot["r1m"][0]
        lines += ["", f"Growth: {g}. Memory bound: {mem}. Breaks first at 100M: {breaks}. "
                  f"Share of R1M's bill: {share:.0%}." + (f" What would cut it: {cut}." if cut and share > 0.05 or name == "release face check" else ""), ""]
    lines += ["#### Total", "", "| pool | core-hours today | before | ratio |", "|---|---|---|---|"]
    for k, label in (("r1m", "R1M"), ("p100m", "100M candidates")):
        lines.append(f"| {label} | {_num(tot[k][0])} | {_num(tot[k][1])} | {_num(tot[k][1] / tot[k][0])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=Path, required=True)
    ap.add_argument("--neardup", type=Path, required=True)
    ap.add_argument("--describe", type=Path)
    ap.add_argument("--describe-mix", type=Path)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    b = bill(json.loads(a.scale.read_text()), json.loads(a.neardup.read_text()),
             json.loads(a.describe.read_text()) if a.describe else None,
             json.loads(a.describe_mix.read_text()) if a.describe_mix else None)
    print(json.dumps(b, indent=1) if a.json else markdown(b))


if __name__ == "__main__":
    main()
