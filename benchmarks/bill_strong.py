"""The bill for strong models: CPU core-hours to describe with a ViT-S/14- or ViT-B/14-sized model
through onnx-global, at R1M and at a 100M pool, with and without a cascade.

Usage: python -m benchmarks.bill_strong [--cascade-share 0.05 0.10 0.20] [--measured FILE.json]
       [--markdown] [--out FILE.json]

Per image: the ViT-S/14-shaped model measured at 224 x 224 (`benchmarks.onnx_global`'s
`vit_s14_224`, one CPU thread, `benchmarks/measured/onnx_global.json`) times the ratio of
multiply-accumulates (`benchmarks.onnx_global.vit_macs`: 12 width² per token per block plus
2 tokens² × width for attention), as docs/onnx-models.md scales it: ViT-S/14 (384 wide) and
ViT-B/14 (768 wide), 12 blocks, at 224 and 518 px. Only ViT-S/14 at 224 is measured.

Images: the candidates (`benchmarks.scale`'s R1M: 4.1M; its 100M scale, P100M: every YFCC100M
image a candidate, 100M), plus the landmark datasets' database and queries
(`benchmarks.bill.R1M_LANDMARK_IMAGES`: rOxford5k's 4,993 and rParis6k's 6,322 database images
and their 70 queries each), described whole at either scale. A cascade describes only a share of
the candidates with the strong model (`--cascade-share`, one row per share; the database and
queries are still described whole); the first, cheap stage that chooses that share is not
counted here (cnn-gem already describes every candidate in today's bill). For reference, today's
whole R1M bill (every stage, docs/performance.md "The bill") is read from that page.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from benchmarks.bill import R1M_LANDMARK_IMAGES
from benchmarks.onnx_global import emit, vit_macs
from benchmarks.scale import P100M, R1M

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "benchmarks" / "measured" / "onnx_global.json"
PERFORMANCE = ROOT / "docs" / "performance.md"
MODELS = {"ViT-S/14": 384, "ViT-B/14": 768}  # width; 12 blocks, patch 14 each
SIDES = (224, 518)
SCALES = {"R1M": R1M["candidates"], "100M": P100M["candidates"]}
BASE = ("ViT-S/14", 224)  # what benchmarks.onnx_global measures (vit_s14_224)


def scaled_ms(base_ms: float, width: int, side: int) -> float:
    """Milliseconds per image of a ViT `width` wide at `side` px, from the measured ViT-S/14 at 224."""
    return base_ms * vit_macs(width, side) / vit_macs(MODELS[BASE[0]], BASE[1])


def core_hours(ms_per_image: float, candidates: int, share: float | None, other_images: int) -> float:
    """CPU core-hours to describe `share` of the candidates (all of them when None) and the other images."""
    images = candidates * (1.0 if share is None else share) + other_images
    return ms_per_image / 1000 * images / 3600


def todays_r1m_bill(text: str) -> int:
    """The whole R1M bill in core-hours, as docs/performance.md states it ("R1M costs **516 core-hours**")."""
    found = re.search(r"R1M costs \*\*([\d,]+) core-hours\*\*", text)
    if found is None:
        raise SystemExit(f"{PERFORMANCE}: no 'R1M costs **N core-hours**' line to read today's bill from")
    return int(found.group(1).replace(",", ""))


def rows(base_ms: float, shares: list[float]) -> list[dict[str, Any]]:
    """One row per model, size, scale and cascade (none, then each share)."""
    out = []
    for model, width in MODELS.items():
        for side in SIDES:
            ms = scaled_ms(base_ms, width, side)
            for scale, candidates in SCALES.items():
                for share in [None, *shares]:
                    out.append({"model": model, "side": side, "gmacs": round(vit_macs(width, side) / 1e9, 2),
                                "ms_per_image": round(ms, 1), "measured": (model, side) == BASE, "scale": scale,
                                "candidates": candidates, "cascade_share": share,
                                "images": round(candidates * (1.0 if share is None else share)) + R1M_LANDMARK_IMAGES,
                                "core_hours": round(core_hours(ms, candidates, share, R1M_LANDMARK_IMAGES), 1)})
    return out


def markdown(report: dict[str, Any]) -> str:
    lines = ["| model | px | GMACs | ms / image | scale | cascade share | images described | core-hours |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        share = "none" if r["cascade_share"] is None else f"{r['cascade_share']:.0%}"
        ms = f"{r['ms_per_image']:,.0f}" + (" (measured)" if r["measured"] else " (scaled)")
        lines.append(f"| {r['model']} | {r['side']} | {r['gmacs']} | {ms} | {r['scale']} | {share} | "
                     f"{r['images']:,} | {r['core_hours']:,.0f} |")
    lines.append(f"\nToday's whole R1M bill, every stage: {report['todays_r1m_core_hours']} core-hours "
                 "(docs/performance.md, \"The bill\").")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cascade-share", type=float, nargs="+", default=[0.05, 0.10, 0.20])
    ap.add_argument("--measured", type=Path, default=MEASURED, help="benchmarks.onnx_global's JSON")
    ap.add_argument("--markdown", action="store_true", help="a markdown table instead of the JSON")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    a = ap.parse_args(argv)
    if not all(0 < s <= 1 for s in a.cascade_share):
        ap.error("--cascade-share: each share in (0, 1]")
    base_ms = float(json.loads(a.measured.read_text())["ms_per_image"]["vit_s14_224"])
    report = {"note": "CPU core-hours (one thread per image) to describe with the strong model alone: the candidates "
                      "(or a cascade's share of them) plus the landmark database and queries; ms per image scaled from "
                      "the measured ViT-S/14 at 224 by MACs",
              "measured_vit_s14_224_ms": base_ms, "measured_from": str(a.measured.relative_to(ROOT)
                                                                        if a.measured.is_relative_to(ROOT) else a.measured),
              "candidates": SCALES, "landmark_images": R1M_LANDMARK_IMAGES,
              "todays_r1m_core_hours": todays_r1m_bill(PERFORMANCE.read_text()),
              "todays_r1m_from": "docs/performance.md, The bill", "rows": rows(base_ms, a.cascade_share)}
    if a.markdown:
        print(markdown(report))
        if a.out:
            a.out.write_text(json.dumps(report, indent=2) + "\n")
    else:
        emit(report, a.out)


if __name__ == "__main__":
    main()
