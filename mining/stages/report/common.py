"""What every report section shares: the inputs, JSON reading, HTML tables, embedded PNG/JPEG."""

from __future__ import annotations

import base64
import functools
import html
import io
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mining.photos import imageindex
from mining.settings import manifest as manifests
from mining.datasets.benchmarks import prefixed_datasets
from mining.errors import UserError
from mining.photos.imagedecode import open_upright

log = logging.getLogger("mining.stages.report")

THUMB = 160
SCATTER_SAMPLE = 20000
NA = '<p class="na">not available</p>'


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """Where each stage's output is; None = not given and not found."""

    metadata: Path | None = None  # METADATA folder (stats.json, part-*.parquet)
    candidates: Path | None = None  # CANDIDATES folder (stats.json, candidates.parquet)
    images: Path | None = None  # IMAGES folder (summary.json, jpg/)
    descriptors: Path | None = None  # DESC folder holding <method>/<set>/store.json
    scores: Path | None = None  # SCORES folder
    decisions: Path | None = None  # decisions.parquet
    selected: Path | None = None  # SELECTED folder
    evaluation: Path | None = None  # evaluation.json
    landmarks: Path | None = None  # gnd_*.pkl or its folder
    manifest: Path | None = None
    benchmarks: Path | None = None  # folder of snakemake benchmark TSVs
    neardup: Path | None = None  # NEARDUP folder (neardup.parquet, stats.json)
    leakrisk: Path | None = None  # LEAKRISK folder (leakrisk.parquet, stats.json)
    audit: Path | None = None  # AUDIT folder (audit.json)
    cascade: Path | None = None  # CASCADE folder (check.json; docs/cascade.md)
    ground_truths: tuple[tuple[str, Path], ...] = ()  # several benchmarks: each one's (name, gnd_<name>.pkl)
    run: Path | None = None  # the run folder (without a manifest `name`, its name is the run's)


def landmark_sets(inp: Inputs) -> list[tuple[str, Any]]:
    """(name prefix, LandmarkDataset) of each benchmark (mining.datasets.benchmarks.prefixed_datasets)."""
    return prefixed_datasets(inp.ground_truths, inp.landmarks)


def run_manifest(inp: Inputs) -> Any:
    """The run's manifest, validated and with its defaults filled (`mining.settings.manifest.load`); None
    without one."""
    return load_manifest(inp.manifest) if inp.manifest is not None else None


def load_manifest(path: Path) -> Any:
    """`mining.settings.manifest.load`, once per file as it is now: the run's inputs and several sections
    read it."""
    try:
        st = path.stat()
    except OSError:
        return manifests.load(path)  # its one line for a missing file
    return _load_manifest(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4)
def _load_manifest(path: Path, mtime_ns: int, size: int) -> Any:
    return manifests.load(path)


def read_json(path: Path | None) -> dict[str, Any] | None:
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        log.warning("%s: not valid JSON; section skipped", path)
        return None


def esc(value: Any) -> str:
    return html.escape(str(value))


def table(rows: list[list[Any]], head: list[str]) -> str:
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def thumb(path: Path, box: tuple[float, float, float, float] | None = None) -> str:
    try:
        with open_upright(path, "RGB") as im:
            if box is not None:
                im = im.crop(tuple(int(round(v)) for v in box))
            im.thumbnail((THUMB, THUMB))
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=80)
    except (OSError, ValueError):
        return '<span class="na">missing</span>'
    return f'<img alt="{esc(path.name)}" src="data:image/jpeg;base64,{base64.b64encode(buf.getvalue()).decode()}">'


@functools.lru_cache(maxsize=4)
def _image_paths(images: Path) -> dict[int, str]:
    """The download's {photo id: image path} ({} without an index.parquet)."""
    try:
        return imageindex.stored(images)
    except UserError as exc:
        log.warning("%s; thumbnails skipped", exc)
        return {}


def candidate_thumb(inp: Inputs, photo_id: Any) -> str:
    """A candidate's thumbnail from the run's image folder ("missing" without one)."""
    rel = _image_paths(inp.images).get(int(photo_id)) if inp.images else None
    return thumb(inp.images / rel) if rel else "<span class=na>missing</span>"


def figure(img: str, caption: str, cls: str = "") -> str:
    """An image with its caption (the caption is escaped here)."""
    attr = f' class="{cls}"' if cls else ""
    return f"<figure{attr}>{img}<figcaption>{esc(caption)}</figcaption></figure>"
