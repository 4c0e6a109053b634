"""Atomic file writes: a crash never leaves a partial file under a final name.

Every stage writes through these helpers so that "the output file exists" means
"the output is complete", which is what resume logic and Snakemake rely on.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from mining.errors import UserError


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


@contextlib.contextmanager
def output_folder(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Create the output folder `path` (and its parents) for the block; if the block fails and
    the folder did not exist before, remove it again (when empty): a failed first run leaves
    nothing behind, not even an empty folder."""
    folder = Path(path)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield folder
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


@contextlib.contextmanager
def exclusive(lock: str | os.PathLike[str], busy: str) -> Iterator[None]:
    """Hold an exclusive lock on the file `lock` (beside the output it guards, removed when
    done) for the block; when another process holds it, UserError(`busy`) at once. The lock is
    the kernel's (flock): a killed holder releases it. The holder removes the file before
    unlocking, so a lock taken on a file that was removed meanwhile is dropped and taken again
    on the new one."""
    path = Path(lock)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        f = open(path, "a+b")  # noqa: SIM115 (closed below)
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise UserError(busy) from None
        try:
            same = os.fstat(f.fileno()).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        f.close()  # the holder before us removed it: lock the new file
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        f.close()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs are shared on clusters
    try:
        yield tmp_path
        os.replace(tmp_path, final)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write bytes atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write text (UTF-8) atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def json_text(obj: Any) -> str:
    """Pretty, key-sorted JSON (stable bytes for identical content), as `write_json` writes it."""
    return json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write pretty, key-sorted JSON atomically (stable bytes for identical content)."""
    write_text(path, json_text(obj))


@contextlib.contextmanager
def files_together(folder: str | os.PathLike[str], names: Sequence[str]) -> Iterator[dict[str, Path]]:
    """Temporary paths (by name) for files of `folder` that belong together, written in the block.
    Only when the whole block succeeds do they take their final names, the last name last: it is
    the commit (a reader that finds it finds the others complete and from the same run). A failure
    in the block (full disk, error) leaves every old file as it was. The last name's old file is
    removed before the renames, so a kill during them leaves no last file (the output is not made;
    run again), never one beside files it does not describe. A name may be in a subfolder
    (`jpg/a.jpg`): its temporary file is beside its final one."""
    final = Path(folder)
    final.mkdir(parents=True, exist_ok=True)
    tmps: dict[str, Path] = {}
    try:
        for name in names:
            (final / name).parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{Path(name).name}.", suffix=".tmp", dir=(final / name).parent)
            os.close(fd)
            os.chmod(tmp, 0o666 & ~_UMASK)
            tmps[name] = Path(tmp)
        yield dict(tmps)
        with contextlib.suppress(FileNotFoundError):
            (final / names[-1]).unlink()
        for name in names:
            os.replace(tmps[name], final / name)
    finally:
        for tmp in tmps.values():
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def write_parquet(path: str | os.PathLike[str], table: pa.Table, **kwargs: Any) -> None:
    """Write a Parquet file atomically."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, **kwargs)


def refuse_over_inputs(out: Path, inputs: dict[str, Path | None], marker: str) -> None:
    """Refuse an OUT folder that `swap_in_folder` would replace while it holds one of the run's
    inputs (`inputs`: what names each, e.g. `--images`), or other files without being an earlier
    output (which holds `marker`): they would be deleted with it."""
    where = Path(out).resolve()
    if where.is_dir() and not (where / marker).exists() and any(where.iterdir()):
        raise UserError(f"{out}: a folder with other files in it (no {marker}: not an earlier output), and this "
                        "output folder is replaced whole (everything in it is deleted); give --out a new or empty "
                        "folder")
    for name, path in inputs.items():
        if path is not None and (where == Path(path).resolve() or where in Path(path).resolve().parents):
            raise UserError(f"{out}: holds {name} {path}, and this output folder is replaced whole (everything in "
                            "it is deleted); give --out a folder of its own")


def swap_in_folder(staging: Path, out: Path) -> None:
    """Replace the folder OUT by the finished folder `staging` (nothing partial under the final name)."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: a file is in the way (a folder is needed here)")
    old = out.parent / f".{out.name}.old"
    if old.exists():
        shutil.rmtree(old)
    if out.exists():
        os.replace(out, old)
    os.replace(staging, out)
    if old.exists():
        shutil.rmtree(old)
