"""Each workflow rule's threads, memory and wall time, from one file (workflows/resources.yaml).

The rules read their figures here, so a local run, a SLURM run and the README agree; the
SLURM profile holds only site keys (partition, account, GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mining.errors import UserError
from mining.files.yamlfile import read_yaml

KEYS = ("threads", "mem_mb", "runtime")


def load(path: str | Path, size: str) -> dict[str, dict[str, int]]:
    """`{rule: {threads, mem_mb, runtime}}` for one size (`r1m`, `demo`) of the file."""
    data, lines = read_yaml(path, "resources file")
    if not isinstance(data, dict) or not data:
        raise UserError(f"{path}: expected sizes (r1m, demo, ...) mapping rules to their resources")
    if size not in data:
        raise UserError(f"{path}: no resource size {size!r} (sizes: {', '.join(sorted(data))})")
    rules = data[size]
    if not isinstance(rules, dict):
        raise UserError(f"{path}:{lines.get((size,), '?')}: {size}: expected rules mapping to resources")
    out: dict[str, dict[str, int]] = {}
    for rule, res in rules.items():
        where = f"{path}:{lines.get((size, rule), '?')}: {size}.{rule}"
        if not isinstance(res, dict) or set(res) != set(KEYS):
            raise UserError(f"{where}: expected exactly {', '.join(KEYS)}")
        bad = [k for k in KEYS if not isinstance(res[k], int) or isinstance(res[k], bool) or res[k] < 1]
        if bad:
            raise UserError(f"{where}: {', '.join(bad)} must be whole numbers >= 1")
        out[rule] = dict(res)
    return out


def of(table: dict[str, dict[str, int]], rule: str) -> dict[str, Any]:
    """One rule's figures; a rule missing from the file is a mistake in the workflow."""
    try:
        return table[rule]
    except KeyError:
        raise UserError(f"workflows/resources.yaml has no figures for rule {rule!r}") from None
