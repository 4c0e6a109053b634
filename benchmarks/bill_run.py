"""The bill from a run: the workflow end to end on a demo world whose candidates are photos in the
Flickr 1024 px size mix, each stage's CPU read from Snakemake's benchmark files and compared with
what `benchmarks/bill.py` projects for the same sizes.

    python -m benchmarks.bill_run presow                     # synthetic unrelated scenes (optional)
    snakemake --cores 2 --config manifest=benchmarks/bill_run.yaml -- RESULTS/world/world.json
    python -m benchmarks.bill_run pool                       # the world's candidates in the mix
    snakemake --cores 2 --config manifest=benchmarks/bill_run.yaml
    python -m benchmarks.bill_run compare --out run.json     # measured vs projected, per stage (JSON)

The demo world (`small` preset: 5,000 candidate images) renders every candidate at 1024×768;
`pool` re-cuts each one to a shape of the mix (`fixtures/flickr_sizes.py`, in its shares: the
largest centred crop of the shape's aspect, resized to it) and writes it where the manifest's
`local` download source reads (`jpg/<key[:3]>/<key>.jpg`, keyed by the photo hash). A burst
(truth `copy_of` another candidate) takes its source's shape; the world's candidates below
1024 px stay as they are (the downloader refuses them). `presow`, run before the world is built,
writes a synthetic photo of the mix (`fixtures.flickr_sizes.photo`) where the world would render
each full-size unrelated scene (the build keeps an image that exists): rendering is most of the
world's build, and an unrelated scene shows no landmark whatever its pixels. The demo world's
defaults, and every default output, are unchanged.

`compare` reads RESULTS/benchmarks/*.tsv (`cpu_time`: user + system seconds of the rule's
processes, `s`: wall, `max_rss`), the run's sizes (metadata rows, images described, queries,
selected, review items) and projects each stage at those sizes from the same JSON the bill is
made from (`benchmarks.bill.at_sizes`). A stage whose measured CPU differs from its projection by
more than 25 % is flagged.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]  # run as `python -m benchmarks.bill_run` from here

RESULTS = str(ROOT / "results" / "bill-run")  # the manifest's results (gitignored)
POOL = str(ROOT / "results" / "bill-run-pool")  # its local download source
TOLERANCE = 0.25


# ----------------------------------------------------------------------------- the pool
def recut(img: Any, w: int, h: int) -> Any:
    """The largest centred crop of `img` with w:h's aspect, resized to w × h (INTER_AREA when
    shrinking, cubic when enlarging)."""
    import cv2

    ih, iw = img.shape[:2]
    if iw * h > ih * w:  # too wide: crop the width
        cw, ch = max(1, round(ih * w / h)), ih
    else:
        cw, ch = iw, max(1, round(iw * h / w))
    x0, y0 = (iw - cw) // 2, (ih - ch) // 2
    crop = img[y0:y0 + ch, x0:x0 + cw]
    interp = cv2.INTER_AREA if w * h < cw * ch else cv2.INTER_CUBIC
    return cv2.resize(crop, (w, h), interpolation=interp)


def write_pool(world: Path, out: Path) -> dict[str, Any]:
    """Every candidate image of the world, re-cut to the Flickr mix, under `out` in our layout."""
    import cv2
    import numpy as np
    import pyarrow.parquet as pq

    from fixtures.flickr_sizes import describe_mix
    from mining.settings.layout import key_relpath
    from mining.stages.demo.paint import encode_jpeg

    idx = pq.read_table(world / "images" / "index.parquet", columns=["photo_id", "photo_hash"]).to_pydict()
    truth = pq.read_table(world / "truth.parquet", columns=["photo_id", "copy_of"]).to_pydict()
    copy_of = dict(zip(truth["photo_id"], truth["copy_of"]))
    ids = sorted(idx["photo_id"])
    key = dict(zip(idx["photo_id"], idx["photo_hash"]))
    shape = pool_shapes(ids, {pid: int(c[6:]) for pid, c in copy_of.items() if c and c.startswith("photo:")})
    counts: dict[str, int] = {}
    kept_small = 0
    for pid in ids:
        data = (world / "images" / f"{pid}.jpg").read_bytes()
        dst = out / key_relpath(key[pid])
        dst.parent.mkdir(parents=True, exist_ok=True)
        img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if max(img.shape[:2]) < 1024:  # the world's too-small photos stay too small
            dst.write_bytes(data)
            kept_small += 1
            continue
        w, h = shape[pid]
        dst.write_bytes(data if img.shape[:2] == (h, w) else encode_jpeg(recut(img, w, h)))
        counts[f"{w}x{h}"] = counts.get(f"{w}x{h}", 0) + 1
    return {"world": str(world), "pool": str(out), "images": len(ids), "kept_below_1024": kept_small,
            "shapes": dict(sorted(counts.items(), key=lambda kv: -kv[1])), "mix": describe_mix()}


def plan(preset: str = "small", seed: int = 0) -> tuple[list[Any], dict[int, int]]:
    """The demo world's candidate render tasks, without rendering (every `_map` answers at once,
    in a scratch folder): what `mining demo build` will render, and each burst's source photo."""
    import tempfile
    from unittest import mock

    import pyarrow.parquet as pq

    from dataclasses import replace

    from mining.settings.options import defaults
    from mining.stages.demo import preview, world

    tasks: list[Any] = []

    def fake_map(ts: list[Any], *args: Any, **kwargs: Any) -> dict[str, tuple[Any, str]]:
        if kwargs.get("desc") in ("candidates", "near-copies"):
            tasks.extend(ts)
        return {t.out: ([0.0, 0.0, 1.0, 1.0], "") for t in ts}

    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(world, "_map", fake_map), \
            mock.patch.object(preview, "write_preview", lambda *a, **k: None):
        world.run_build(world.BuildInputs(), tmp, replace(defaults("demo"), preset=preset, seed=seed), workers=1)
        truth = pq.read_table(Path(tmp) / "truth.parquet", columns=["photo_id", "copy_of"]).to_pydict()
    burst_of = {pid: int(c[6:]) for pid, c in zip(truth["photo_id"], truth["copy_of"]) if c and c.startswith("photo:")}
    return tasks, burst_of


def pool_shapes(ids: list[int], burst_of: dict[int, int]) -> dict[int, tuple[int, int]]:
    """Each candidate's (width, height): the mix over the photo ids in order; a burst has the
    shape of the photo it repeats."""
    from fixtures.flickr_sizes import sizes

    shape = dict(zip(ids, sizes(len(ids))))
    for pid, src in burst_of.items():
        if src in shape:
            shape[pid] = shape[src]
    return shape


def presow(world_dir: Path, preset: str = "small", seed: int = 0) -> dict[str, Any]:
    """Put a synthetic photo of the mix (`fixtures.flickr_sizes.photo`, at the candidate's pool
    shape) where the world will write each full-size unrelated scene, so the world's build
    (which keeps a candidate image that exists) renders only the landmark views, the other
    buildings and the near-copies. Rendering is the world's slowest part, and an unrelated
    scene is no landmark whatever its pixels; a scene already rendered is left as it is."""
    from fixtures.flickr_sizes import photo
    from mining.files import atomic
    from mining.stages.demo.paint import encode_jpeg

    tasks, burst_of = plan(preset, seed)
    ids = sorted(int(Path(t.out).stem) for t in tasks)
    shape = pool_shapes(ids, burst_of)
    scenes = sorted((t for t in tasks if t.kind == "scene" and not t.small), key=lambda t: t.out)
    written = 0
    for t in scenes:
        dst = world_dir / t.out
        if dst.exists():
            continue
        w, h = shape[int(Path(t.out).stem)]
        atomic.write_bytes(dst, encode_jpeg(photo(int(Path(t.out).stem) % (2**32), w, h)))
        written += 1
    return {"candidates": len(ids), "scenes": len(scenes), "synthetic_scenes": written,
            "scenes_rendered_by_the_world": len(scenes) - written}


# ----------------------------------------------------------------------------- the comparison
# A benchmark file (its name under RESULTS/benchmarks, no .tsv) → the bill's stage it is part of;
# `None`: a stage the bill does not project (the demo's own, or one it leaves out).
def bill_stage(name: str) -> str | None:
    if name in ("ingest", "geofilter"):
        return "ingest+geofilter"
    if name.startswith("describe/"):
        method, _, tail = name[len("describe/"):].rpartition("_")
        kind = "extract cnn-gem" if method == "cnn-gem" else "extract rsift (shared pass)" if "+" in method else None
        if kind is None:
            return None
        return kind if tail == "candidates" else f"{kind}, landmark images"
    return {"neardup": "near-duplicates", "score": "score (70 queries × 3 methods)", "review_import": "review import",
            "select": "select + ATTRIBUTION", "evaluate": "evaluate (70 queries × 3 methods)",
            "release": "release face check", "report": "report"}.get(name)


def read_benchmarks(folder: Path) -> dict[str, dict[str, float]]:
    """Every rule's benchmark TSV: {name: {cpu_s, wall_s, max_rss_mb}} (the last row of each)."""
    out: dict[str, dict[str, float]] = {}
    for f in sorted(folder.rglob("*.tsv")):
        with f.open() as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        if not rows:
            continue
        r = rows[-1]

        def num(k: str) -> float:
            v = r.get(k)
            return float(v) if v not in (None, "", "NA", "-") else 0.0

        out[str(f.relative_to(folder).with_suffix(""))] = {"cpu_s": round(num("cpu_time"), 2), "wall_s": round(num("s"), 2),
                                                           "max_rss_mb": round(num("max_rss"), 1)}
    return out


def run_sizes(results: Path) -> dict[str, float]:
    """The sizes the run's stages worked on, from its outputs."""
    import pyarrow.parquet as pq

    from mining.retrieval.descriptors import open_store
    from mining.stages.describe.stage import FIT_IMAGES

    world = json.loads((results / "world" / "world.json").read_text())
    d = results / "descriptors" / "cnn-gem"
    queries = len(open_store(d / "queries").ids())
    candidates = len(open_store(d / "candidates").ids())
    return {
        "rows": world["counts"]["metadata_rows"],
        "candidates": candidates,
        "fit_images": min(FIT_IMAGES, candidates),  # the default of `mining describe --fit-images`
        "landmark_images": queries + len(open_store(d / "database").ids()),
        "queries": queries,
        "selected": sum(1 for line in (results / "selected" / "distractors.txt").read_text().splitlines() if line.strip()),
        "review_items": pq.read_metadata(results / "scores" / "review_queue.parquet").num_rows,
    }


def compare(results: Path, scale: dict[str, Any], nd: dict[str, Any], mix: dict[str, Any] | None,
            describe: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measured CPU per bill stage against the projection at the run's sizes."""
    from benchmarks.bill import at_sizes

    bench = read_benchmarks(results / "benchmarks")
    sizes = run_sizes(results)
    projected = at_sizes(scale, nd, sizes, describe, mix)
    measured: dict[str, float] = {}
    others: dict[str, dict[str, float]] = {}
    for name, b in bench.items():
        stage = bill_stage(name)
        if stage is None:
            others[name] = b
        else:
            measured[stage] = measured.get(stage, 0.0) + b["cpu_s"]
    stages = []
    for stage, proj in projected.items():
        got = measured.get(stage)
        ratio = got / proj if got is not None and proj else None
        stages.append({"stage": stage, "measured_cpu_s": None if got is None else round(got, 1),
                       "projected_cpu_s": None if proj is None else round(proj, 1),
                       "measured_over_projected": None if ratio is None else round(ratio, 3),
                       "off_by_more_than_25_percent": None if ratio is None else abs(ratio - 1) > TOLERANCE})
    return {"sizes": sizes, "stages": stages, "not_projected": others, "benchmark_files": bench,
            "measured_total_cpu_s": round(sum(b["cpu_s"] for b in bench.values()), 1),
            "note": "cpu_s: Snakemake's benchmark cpu_time (user + system of the rule's processes); projections "
                    "from benchmarks.bill.at_sizes at the run's sizes"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    ps = sub.add_parser("presow", help="synthetic unrelated scenes of the mix where the world will look for them")
    ps.add_argument("--world", type=Path, default=Path(RESULTS) / "world")
    p = sub.add_parser("pool", help="write the world's candidates in the Flickr size mix (the local source)")
    p.add_argument("--world", type=Path, default=Path(RESULTS) / "world")
    p.add_argument("--out", type=Path, default=Path(POOL))
    c = sub.add_parser("compare", help="measured CPU per stage against the bill's projection (JSON)")
    c.add_argument("--results", type=Path, default=Path(RESULTS))
    c.add_argument("--scale", type=Path, default=ROOT / "benchmarks/measured/scale_before.json")
    c.add_argument("--neardup", type=Path, default=ROOT / "benchmarks/measured/neardup_index_1m.json")
    c.add_argument("--describe-mix", type=Path, default=ROOT / "benchmarks/measured/describe_mix.json")
    c.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.cmd == "presow":
        res = presow(a.world)
    elif a.cmd == "pool":
        res = write_pool(a.world, a.out)
    else:
        res = compare(a.results, json.loads(a.scale.read_text()), json.loads(a.neardup.read_text()),
                      json.loads(a.describe_mix.read_text()) if a.describe_mix else None)
    text = json.dumps(res, indent=1, ensure_ascii=False)
    if getattr(a, "out", None) and a.cmd == "compare":
        a.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
