"""`SHA256SUMS` files: written for a folder (the release, the evaluation kit) and checked.

The format is `sha256sum`'s (hex digest, two spaces, the path relative to the folder; sorted
by path), so `sha256sum -c SHA256SUMS` inside the folder checks it too. `verify` is stricter
than `sha256sum -c`: a file that the list does not name is refused as well (a shard added to
a descriptor store would change what is read from it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from mining.errors import UserError
from mining.files.plainpaths import check_tree

SUMS = "SHA256SUMS"


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def check_described(folder: Path, described_by: str, digests: object) -> None:
    """Refuse a folder whose files are not the ones its `described_by` file names (`digests`: file
    name -> sha256, as `mining score` writes them in stats.json): files of two runs, or a file
    changed by hand. A folder from before the digests were recorded (no mapping) is taken as is."""
    if not isinstance(digests, dict):
        return
    for name, digest in sorted(digests.items()):
        path = Path(folder) / str(name)
        if not path.is_file() or file_sha256(path) != digest:
            raise UserError(f"{path}: is not the file {Path(folder) / described_by} describes (files of two runs, "
                            "or one changed by hand); run the stage that wrote this folder again")


def sha256sums(root: Path, known: dict[str, str] | None = None) -> str:
    """`sha256sum` lines (two spaces, binary-safe paths relative to root) for every file
    under root except SHA256SUMS, sorted by path. `known`: digests already computed from the
    bytes written (relative path → hex), not read and hashed again."""
    known = {Path(k).as_posix(): v for k, v in (known or {}).items()}
    lines = []
    for p in sorted(q.relative_to(root).as_posix() for q in root.rglob("*") if q.is_file()):
        if p == SUMS:
            continue
        digest = known.get(p) or file_sha256(root / p)
        lines.append(f"{digest}  {p}\n")
    return "".join(lines)


def verify(root: Path, what: str) -> int:
    """Check every file under `root` against root/SHA256SUMS: each listed file present with its
    digest, no other file, and no symbolic link anywhere (`mining.files.plainpaths.check_tree`). One-line UserError naming the first file that differs; returns the
    number of files checked."""
    check_tree(root, what)  # a linked file or folder would be hashed (or hidden) from outside root
    sums = root / SUMS
    if not sums.is_file():
        raise UserError(f"{root}: no {SUMS}; not {what}, or an incomplete copy of one")
    listed: dict[str, str] = {}
    for n, line in enumerate(sums.read_text(errors="replace").splitlines(), 1):
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64 or not rel or rel.startswith("/") or ".." in Path(rel).parts:
            raise UserError(f"{sums}:{n}: not a `sha256sum` line ({line[:80]!r}); {what} was changed or damaged")
        listed[rel] = digest
    present = {q.relative_to(root).as_posix() for q in root.rglob("*") if q.is_file()} - {SUMS}
    extra = sorted(present - set(listed))
    if extra:
        raise UserError(f"{root / extra[0]}: not listed in {SUMS}; {what} was changed (added files are refused)")
    for rel, digest in sorted(listed.items()):
        path = root / rel
        if not path.is_file():
            raise UserError(f"{path}: listed in {SUMS} but missing; {what} is incomplete or was changed")
        if file_sha256(path) != digest:
            raise UserError(f"{path}: checksum differs from {SUMS}; {what} was changed or damaged")
    return len(listed)
