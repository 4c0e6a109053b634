"""Folders whose files are read by name (the evaluation kit, a `local` download source, a
landmark table's images) stay inside themselves: no symbolic link is followed, and every
name taken from a file (a method name in kit.json, an image name in a table) is one plain
file name, never a path.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mining.errors import UserError


def plain_name(name: str) -> bool:
    """One file name on every system: not empty, `.` or `..`; no slash, backslash, NUL or
    other control character; no space at either end."""
    return (isinstance(name, str) and name not in ("", ".", "..") and name == name.strip()
            and not any(c in "/\\" or ord(c) < 32 or ord(c) == 127 for c in name))


def check_tree(root: Path, what: str) -> None:
    """Every entry under `root` a regular file or a folder (no symbolic link, to a file or a
    folder, nor anything else), with a plain name; one-line UserError naming the first that
    is not. Links are not followed: a linked folder's contents are never looked at."""
    if root.is_symlink():
        raise UserError(f"{root}: a symbolic link; give {what} itself (its files are read from inside it only)")
    for folder, dirs, files in os.walk(root, followlinks=False, onerror=_walk_error(what)):
        for name in sorted(dirs) + sorted(files):
            path = Path(folder) / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise UserError(f"{path}: a symbolic link inside {what}; links are refused (they can point outside it)")
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise UserError(f"{path}: not a regular file or folder; {what} holds only files and folders")
            if not plain_name(name):
                raise UserError(f"{path}: {name!r} is not a plain file name; {what} was changed")


def _walk_error(what: str):  # noqa: ANN202 - os.walk's callback
    def fail(exc: OSError) -> None:
        raise UserError(f"{exc.filename}: not readable inside {what} ({exc.strerror})")
    return fail


def regular_inside(path: Path, real_root: str) -> bool:
    """`path` is a regular file (not a symbolic link) whose real path lies inside the folder
    whose real path (`os.path.realpath`) is `real_root`."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
    except OSError:
        return False
    return os.path.commonpath([os.path.realpath(path), real_root]) == real_root
