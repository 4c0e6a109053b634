"""Places a stage cannot write to, made for real where the machine allows it.

Tests run as root in CI, where `chmod 555` stops nobody: there a read-only folder is a
read-only tmpfs mount, and a full disk a tiny tmpfs. Mounting needs CAP_SYS_ADMIN; where it
is refused the test is skipped with that reason (the always-run tests use a path under a
regular file, ENOTDIR, and a monkeypatched ENOSPC instead).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest


def _mount_tmpfs(path: Path, options: str) -> None:
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a read-only or full file system here")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here ({r.stderr.strip()})")


@contextlib.contextmanager
def read_only_folder(path: Path) -> Iterator[Path]:
    """An existing, empty folder that nobody (root included) can create files in."""
    path.mkdir(parents=True)
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)
        return
    _mount_tmpfs(path, "ro,size=64k")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


@contextlib.contextmanager
def full_disk(path: Path, size_kb: int = 64) -> Iterator[Path]:
    """A writable folder on a file system of `size_kb` KiB (needs root and mount)."""
    path.mkdir(parents=True)
    if os.geteuid() != 0:
        pytest.skip("a tiny tmpfs needs root")
    _mount_tmpfs(path, f"size={size_kb}k")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)
