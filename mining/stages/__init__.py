"""The pipeline's stages, one package each: `mining/stages/<stage>/` holds the stage's code and
`cli.py`, its CLI verb (`STEP`, its place in the pipeline, and `register(subparsers)`). The
CLI's verbs, the architecture test and docs/stages.md take the list from here; code two stages
need lives outside `mining/stages/` (docs/architecture.md)."""

from __future__ import annotations

import importlib
import pkgutil


def is_stage(name: str) -> bool:
    """Whether a stage has this name (nothing imported)."""
    return any(m.ispkg and m.name == name for m in pkgutil.iter_modules(__path__))


def names() -> list[str]:
    """Every stage, in pipeline order (each `cli.py`'s STEP)."""
    found = [m.name for m in pkgutil.iter_modules(__path__) if m.ispkg]
    return sorted(found, key=lambda name: importlib.import_module(f"mining.stages.{name}.cli").STEP)
