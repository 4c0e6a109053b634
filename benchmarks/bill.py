"""The bill: core-hours per stage for R1M and for a 100M-candidate pool, before and after, from
the benchmarks' JSON.

Usage: python -m benchmarks.bill --scale SCALE.json --neardup NEARDUP.json [--describe DESCRIBE.json]
       [--describe-mix MIX.json] [--run RUN.json] [--json]

SCALE.json: `benchmarks.scale` output (or `--merge` of several): every stage but near-duplicates
and the face check, with R1M and 100M projections (extraction's per-image figures are the
reference paths: torch cnn-gem, one RootSIFT extraction per method). Its `same_run_ratios`
(cnn-gem ONNX Runtime over torch, the shared RootSIFT pass over separate ones, from
`benchmarks/describe.py`) turn them into today's; DESCRIBE.json (a `benchmarks/describe.py`
run with both RootSIFT methods), when given, replaces the shared pass's ratio with its own.
MIX.json (`benchmarks.describe_mix` output), when given, gives cnn-gem's CPU per image instead:
ONNX Runtime's own for whole describe processes on the Flickr size mix (torch's, same run, the
reference). score and evaluate add rsift-asmk's kernel over every (query, candidate) pair.
RUN.json (`benchmarks.bill_run compare --out`), when given: extraction, the landmark images and
the release per image as a workflow run on the Flickr mix measured them (`from_run`).
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
    "extract, landmark images": ("the landmark datasets' images (fixed: 11,455 at R1M)", "as extraction", "nothing", ""),
    "release face check": ("linear in N selected", "one image per thread", "core-hours (24.4M images at N = 24.4M)",
                           "a GPU; not a downscaled copy: at 0.9-0.5 of the size it loses faces found at full "
                           "size, for at most 22 % less CPU (benchmarks/release_faces.py --mix)"),
}


# The ASMK kernel per (query, image) pair, one CPU: `python -m benchmarks.spatial --images 24`
# (24 photos of the Flickr mix; docs/performance.md, spatial verification). score and evaluate
# compare every query with every candidate of the pool; for rsift-asmk that is this kernel, not a
# GEMM (benchmarks.scale measures three global methods), and it is most of both stages' CPU.
ASMK_S_PER_PAIR = 40.4e-6


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
    """Today's extraction CPU seconds per image. cnn-gem: with MIX.json, its own measurement of
    ONNX Runtime on the Flickr mix (whole describe processes); the reference divided by MIX's
    ratio would mix two setups (torch in-process on 1024×768 JPEGs: 0.387 s; torch as a whole
    process on the mix: 0.575 s), and a workflow run on the mix measured 35 % above that
    quotient. Without MIX.json, and for the shared RootSIFT pass: the reference path's figure
    divided by the same-run ratio."""
    ratios = scale.get("same_run_ratios", {})
    onnx = min(ratios.get("cnn_gem_onnx_over_torch_images_per_cpu_s", [1.0]))
    shared = ratios.get("rsift_shared_pass_over_separate", 1.0)
    if describe and "shared_rootsift" in describe:
        shared = describe["shared_rootsift"]["speedup"]
    ex = scale["extract"]
    cnn = mix["process"]["ms_per_image"]["onnx"] / 1000 if mix else ex["cnn-gem"]["cpu_s_per_image"] / onnx
    return {"cnn-gem": cnn,
            "rsift (shared pass)": (ex["rsift-asmk"]["cpu_s_per_image"] + ex["rsift-vlad"]["cpu_s_per_image"]) / shared}


def at_sizes(scale: dict[str, Any], nd: dict[str, Any], sizes: dict[str, float], describe: dict[str, Any] | None = None,
             mix: dict[str, Any] | None = None) -> dict[str, float | None]:
    """CPU seconds per stage that the bill's figures give for a run of `sizes` (keys: rows,
    candidates, landmark_images, queries, selected, review_items; fit_images: the candidates a
    learning method extracts once more to learn its model): the measured curves of SCALE.json at
    those sizes (`interpolate`), score at candidates × queries / 70, extraction and the face
    check per image, near-duplicates from NEARDUP.json's per-image rates; score and evaluate add
    rsift-asmk's kernel over every (query, candidate) pair (`ASMK_S_PER_PAIR`)."""
    from benchmarks.scale import stage_cpu

    def curve(key: str, size_key: str, size: float) -> float | None:
        rows = scale.get(key) or []
        return interpolate([(r[size_key], stage_cpu(r)) for r in rows], size)

    img = per_image(scale, describe, mix)
    n, sel, fit = sizes["candidates"], sizes["selected"], sizes.get("fit_images", 0)
    asmk = ASMK_S_PER_PAIR * sizes["queries"] * n  # rsift-asmk's kernel over every (query, candidate) pair
    face = scale.get("release_faces_cpu_s_per_image", {}).get("mean")
    return {
        "ingest+geofilter": curve("ingest_geofilter", "rows", sizes["rows"]),
        "extract cnn-gem": img["cnn-gem"] * (n + fit),
        "extract rsift (shared pass)": img["rsift (shared pass)"] * (n + fit),
        "extract cnn-gem, landmark images": img["cnn-gem"] * sizes["landmark_images"],
        "extract rsift (shared pass), landmark images": img["rsift (shared pass)"] * sizes["landmark_images"],
        "near-duplicates": (nd["hash_cpu_s_per_image"] + nd["landmark_cpu_s_per_candidate"]) * n,
        "score (70 queries × 3 methods)": curve("score", "candidates", n * sizes["queries"] / 70) + asmk,
        "review import": curve("review_import", "items", sizes["review_items"]),
        "select + ATTRIBUTION": curve("select", "n", sel),
        "evaluate (70 queries × 3 methods)": curve("evaluate", "n", sel) + asmk,
        "release face check": face * sel if face else None,
        "report": curve("report", "n", sel),
    }


def _num(v: float | None) -> str:
    return "–" if v is None else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}")


def bill(scale: dict[str, Any], nd: dict[str, Any], describe: dict[str, Any] | None = None,
         mix: dict[str, Any] | None = None, run: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
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
    for name in ("score (70 queries × 3 methods)", "evaluate (70 queries × 3 methods)"):
        if name in out:  # rsift-asmk's kernel over every (query, candidate) pair: 70 queries × the pool
            pairs = {k: ASMK_S_PER_PAIR * v["queries"] * v["candidates"] / 3600 for k, v in (("r1m", R1M), ("p100m", P100M))}
            out[name].update({k: (out[name][k][0] + pairs[k], out[name][k][1] + pairs[k]) for k in pairs},
                             reference="same code: the GEMMs (benchmarks.scale) + rsift-asmk's kernel, 40.4 µs a pair")
    cnn = summ["extract cnn-gem"]
    out["extract cnn-gem"] = {k: (cnn[f"{k}_core_hours"] / onnx, cnn[f"{k}_core_hours"]) for k in ("r1m", "p100m")}
    out["extract cnn-gem"].update(command=f"{DESCRIBE_CMD} --methods cnn-gem; {SCALE_CMD}",
                                  reference=f"torch (ONNX Runtime: {onnx}× the images per CPU s, least of the same-run ratios)")
    if mix:  # ONNX Runtime's own CPU per image on the size mix; the reference: torch's in the same run
        from benchmarks.scale import P100M, R1M

        ms = mix["process"]["ms_per_image"]
        out["extract cnn-gem"] = {k: (ms["onnx"] * v["candidates"] / 3.6e6, ms["torch"] * v["candidates"] / 3.6e6)
                                  for k, v in (("r1m", R1M), ("p100m", P100M))}
        out["extract cnn-gem"].update(command=MIX_CMD, reference=(
            f"torch, {ms['torch']} ms per image against ONNX Runtime's {ms['onnx']} (whole describe processes on "
            f"{mix['process']['images']} JPEGs of the Flickr size mix, least of each backend's repeats)"))
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
    if run:
        out.update(from_run(run, out, nd))
    return out


# R1M's landmark images: rOxford5k's and rParis6k's database images and their 70 queries each
R1M_LANDMARK_IMAGES = 4993 + 6322 + 2 * 70


def from_run(run: dict[str, Any], parts: dict[str, dict[str, Any]], nd: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The stages whose figure per image a workflow run measured (RUN.json, `benchmarks.bill_run
    compare`): extraction per candidate (the learning pass's sample counted as images, so the
    learning is spread over them: an upper bound at R1M), the landmark images' extraction, and
    near-duplicates' hashing per candidate (the process's fixed cost spread too; the pairs'
    cosines, which grow as n², from NEARDUP.json); each with the parts' figure as the reference.
    The release is not taken from a run: its face check costs more on photos with faces than on
    a synthetic pool without any."""
    from benchmarks.scale import P100M, R1M

    sz, got = run["sizes"], {s["stage"]: s["measured_cpu_s"] for s in run["stages"]}
    nd_rest = {k: (nd["projection"][j]["pairs_core_hours"] + nd["projection"][j]["landmark_core_hours"])
               for k, j in (("r1m", "r1m"), ("p100m", "ilias_100m"))}
    images = sz["candidates"] + sz.get("fit_images", 0)
    cmd = "python -m benchmarks.bill_run compare"
    out: dict[str, dict[str, Any]] = {}
    for name in ("extract cnn-gem", "extract rsift (shared pass)"):
        per = got[name] / images
        out[name] = {k: (per * v["candidates"] / 3600, parts[name][k][0]) for k, v in (("r1m", R1M), ("p100m", P100M))}
        out[name].update(command=cmd, reference=f"the parts' figure ({parts[name]['command']}); the run: "
                                                f"{per * 1000:.0f} ms per image on the Flickr mix")
    per = (got["extract cnn-gem, landmark images"] + got["extract rsift (shared pass), landmark images"]) / sz["landmark_images"]
    out["extract, landmark images"] = {k: (per * R1M_LANDMARK_IMAGES / 3600,) * 2 for k in ("r1m", "p100m")}
    out["extract, landmark images"].update(command=cmd, reference=f"same figure: {per * 1000:.0f} ms per image, all methods")
    if got.get("near-duplicates") and "near-duplicates" in parts:  # hashing per candidate, fixed costs included
        per = got["near-duplicates"] / sz["candidates"]
        out["near-duplicates"] = {k: (per * v["candidates"] / 3600 + nd_rest[k], parts["near-duplicates"][k][0])
                                  for k, v in (("r1m", R1M), ("p100m", P100M))}
        out["near-duplicates"].update(command=cmd, reference=f"the parts' figure ({NEARDUP_CMD}); the run: {per * 1000:.1f} "
                                                             "ms per candidate, plus the pairs' cosines at that size")
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
    ap.add_argument("--run", type=Path, help="a workflow run's measured figures (benchmarks.bill_run compare --out)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    b = bill(json.loads(a.scale.read_text()), json.loads(a.neardup.read_text()),
             json.loads(a.describe.read_text()) if a.describe else None,
             json.loads(a.describe_mix.read_text()) if a.describe_mix else None,
             json.loads(a.run.read_text()) if a.run else None)
    print(json.dumps(b, indent=1) if a.json else markdown(b))


if __name__ == "__main__":
    main()
