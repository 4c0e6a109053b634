"""What made a published file: the package's version, its git commit when it runs from a
checkout, and the pinned environment (`mining.pins.provenance`). The release's stats and card,
its staging settings, the kit's kit.json and the report's headline record it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mining import __version__, pins


def code_version(here: Path = Path(__file__).resolve().parent) -> dict[str, str | None]:
    """The package version and, when the package runs from a git checkout (`here`: a folder in
    it), its commit and whether any tracked file of the checkout differs from it (the package,
    the workflow's rules, the schema: all make the outputs); the lock's digest, whether the
    installed libraries are the locked ones, the pinned SIMD level and the CPU
    (`mining.pins.provenance`)."""
    commit = dirty = None
    try:
        r = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if r.returncode == 0:
            commit = r.stdout.strip()
            s = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
            dirty = "yes" if s.returncode == 0 and s.stdout.strip() else "no"
    except (OSError, subprocess.SubprocessError):
        pass
    return {"package": f"distractor-mining {__version__}", "commit": commit, "local_changes": dirty,
            **pins.provenance()}
