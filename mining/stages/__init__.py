"""The pipeline's stages, one package each: `mining/stages/<stage>/` holds the stage's code and
`cli.py`, its CLI verb (`register(subparsers)`). `PIPELINE` below is their order, the one place
it is written: the CLI's verbs, the workflow's rule files, the architecture test and
docs/stages.md take it from here; code two stages need lives outside `mining/stages/`
(docs/architecture.md)."""

from __future__ import annotations

import pkgutil

# The stages in pipeline order (docs/architecture.md "The map"): each one's CLI verb, its rule
# file workflows/rules/<stage>.smk and its section of docs/stages.md.
PIPELINE = [
    "demo",  # the embedded demo world (and its image server)
    "landmarks",  # the landmark dataset: checked, or built from annotations
    "ingest",  # YFCC100M metadata → Parquet
    "geofilter",  # → candidates (countries, areas, licences, a sample)
    "download",  # → images
    "describe",  # → descriptors per method and image set
    "cascade",  # an expensive method described on a shortlist only, and checked
    "neardup",  # near-duplicate groups, near-copies of landmark images
    "score",  # → per-candidate score, the review queue
    "leakrisk",  # candidates likely to show a landmark that the queue missed
    "review",  # people confirm or reject the queue
    "select",  # → the distractor set (top N)
    "audit",  # the set's leak rate, measured
    "evaluate",  # mAP none / random / mined / all: is the set hard?
    "release",  # → a publishable set (licences, faces, card, kit)
    "report",  # → the HTML report
]


def is_stage(name: str) -> bool:
    """Whether a stage has this name (nothing imported)."""
    return any(m.ispkg and m.name == name for m in pkgutil.iter_modules(__path__))


def names() -> list[str]:
    """Every stage, in pipeline order (`PIPELINE`, which must name every stage package once)."""
    found = {m.name for m in pkgutil.iter_modules(__path__) if m.ispkg}
    if found != set(PIPELINE) or len(PIPELINE) != len(found):
        raise RuntimeError(f"mining.stages.PIPELINE {sorted(PIPELINE)} does not list the stage packages {sorted(found)}")
    return list(PIPELINE)
