"""The settings that travel with an ONNX model: `MODEL.onnx.json` beside the file, written by
`python -m mining.methods.export` and read by `onnx-global`, and the checks of settings that
are likely wrong.

- the file: `{"onnx_global": {input, size, patch, mean, std, channels, output, output_name,
  prefix_tokens, p}, "export": {...}}`; `onnx_global` holds the method's own settings (checked
  as the manifest's are), `export` what the export did (the factory, torch's version, the
  parity figures): read by people, not by the method.
- precedence: the method's defaults, then the file, then the manifest (or `--param`); a manifest
  value that differs from the file's is used, with a warning naming both.
- warnings (each once per process, on the `mining.methods` log): the above; `cls_token` on a
  graph that also outputs a pooled (1, D) vector (SigLIP has no CLS token: token 0 is a patch);
  mean/std other than the model's own metadata (the file's, or the ONNX file's `mean` / `std`
  metadata_props, which the export writes too).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

from mining.errors import UserError
from mining.files import atomic
from mining.files.tables import read_json
from mining.methods.base import warn_once


SUFFIX = ".json"
KEYS = ("input", "size", "patch", "mean", "std", "channels", "output", "output_name", "prefix_tokens", "p")
def settings_path(model: str | Path) -> Path:
    """Where a model's settings file is: beside it, its name + `.json` (`dino.onnx.json`)."""
    return Path(str(model) + SUFFIX)


def write(model: str | Path, settings: dict[str, Any], export: dict[str, Any]) -> Path:
    """Write the settings file of `model` (atomically); returns its path."""
    path = settings_path(model)
    atomic.write_json(path, {"onnx_global": {k: settings[k] for k in KEYS if k in settings}, "export": export})
    return path


def read(model: str | Path, check: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The `onnx_global` settings of `model`'s settings file ({} when there is none), checked by
    `check` (the method's own check of its settings); UserError (one line) naming the file."""
    path = settings_path(model)
    if not path.is_file():
        return {}
    doc = read_json(path, "settings file")
    found = doc.get("onnx_global") if isinstance(doc, dict) else None
    if not isinstance(found, dict):
        raise UserError(f"{path}: not an onnx-global settings file (no \"onnx_global\" mapping); delete it or "
                        "export the model again (python -m mining.methods.export)")
    unknown = sorted(set(found) - set(KEYS))
    if unknown:
        raise UserError(f"{path}: unknown setting(s) {unknown} (a settings file may hold {', '.join(KEYS)})")
    try:
        check(found)
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None
    return {k: v for k, v in found.items() if v is not None}


def merged(who: str, model: str | Path, given: dict[str, Any], found: dict[str, Any]) -> dict[str, Any]:
    """The file's settings under the given ones (the manifest's win), with a warning when they
    differ. The file's `output_name` goes with its `output`: another output given, it is not used."""
    if "output" in given and "output_name" not in given and "output" in found and given["output"] != found["output"]:
        found = {k: v for k, v in found.items() if k != "output_name"}
    clash = sorted(k for k in found if k in given and _differ(given[k], found[k]))
    if clash:
        said = ", ".join(f"{k}={given[k]!r} (the file: {found[k]!r})" for k in clash)
        warn_once(__name__,
                  f"{who}: the settings given differ from {settings_path(model).name}, the model's own: {said}; "
                  "the given ones are used")
    return {**found, **given}


def _differ(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) != len(b) or any(_differ(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b)) > 1e-9 * max(1.0, abs(float(a)))
    return a != b


def metadata_norm(meta: dict[str, str]) -> dict[str, list[float]]:
    """`mean` and `std` of an ONNX file's metadata_props (a JSON list or numbers separated by
    commas or spaces), those that parse as 3 numbers."""
    found = {}
    for key in ("mean", "std"):
        text = meta.get(key)
        if text is None:
            continue
        try:
            values = json.loads(text) if text.strip().startswith("[") else [float(v) for v in text.replace(",", " ").split()]
            values = [float(v) for v in values]
        except (ValueError, TypeError):
            continue
        if len(values) == 3:
            found[key] = values
    return found


def likely_wrong(who: str, params: dict[str, Any], pooled: Sequence[str], meta: dict[str, str],
                 filed: Collection[str] = ()) -> None:
    """Warn (once) about settings that are likely wrong for this graph: `cls_token` where the graph
    has a pooled (1, D) output too, mean/std other than the ONNX file's own metadata (those the
    settings file holds, `filed`, were compared with it already)."""
    if params["output"] == "cls_token" and pooled:
        warn_once(__name__, f"{who}: output=cls_token takes token 0, but the model also outputs a pooled vector "
                  f"({', '.join(repr(p) for p in pooled)}): a model without a CLS token (SigLIP) has a patch there; "
                  f"use output: descriptor, output_name: {pooled[0]} (or export the tokens alone)")
    own = metadata_norm(meta)
    off = [k for k in ("mean", "std") if k in own and k not in filed and _differ(list(params[k]), own[k])]
    if off:
        said = ", ".join(f"{k}={list(params[k])} (the model's: {own[k]})" for k in off)
        warn_once(__name__, f"{who}: {said}: the model's own metadata says otherwise; the image is normalised as set, "
                  "check which is right")
