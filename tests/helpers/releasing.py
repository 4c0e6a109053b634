"""`mining.stages.release.stage.run` called the way the release tests describe a run: settings as
keywords (`licenses=`, `blur=`, `tar=`, ... over the schema's defaults) and the card's inputs by name."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from mining.settings.options import defaults
from mining.stages.release.stage import Inputs, run

_INPUTS = ("candidates", "candidates_stats", "evaluation", "manifest", "audit", "descriptors")
_RUN = ("workers", "margin", "detector_factory", "progress", "target")

OVER_TARGET_ALLOWED = replace(defaults("audit"), over_target="allow")  # `target=`: an audit over it is released


def run_release(selected: Path, images: Path, out: Path, blur: bool | None = None, **kw: Any) -> dict:
    if "descriptors" in kw:
        kw["descriptors"] = tuple(kw["descriptors"])
    inputs = Inputs(selected=selected, images=images, **{k: kw.pop(k) for k in _INPUTS if k in kw})
    kw.setdefault("kit", False)  # the keyword form's default: no kit unless asked
    extras = {k: kw.pop(k) for k in _RUN if k in kw}
    settings = replace(defaults("release"), **kw, **({} if blur is None else {"blur_faces": blur}))
    return run(inputs=inputs, out=out, options=settings, **extras)
