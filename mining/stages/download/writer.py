"""Where verified bytes go: atomic files in the R1M layout, or one tar per shard.

Both are crash-safe: a file only appears under its final name once complete (`mining.files.atomic`),
and a shard's tar is built under a temporary name and renamed when the shard ends, so a
SIGKILL leaves only `.tmp` debris that the next run sweeps away.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa

from mining.files import atomic
from mining.settings.layout import image_key, key_relpath

# one entry per source a photo went to, in order: its name, the address asked, the outcome
TRIED = pa.list_(pa.struct([("source", pa.string()), ("url", pa.string()), ("status", pa.string())]))
STATUS_SCHEMA = pa.schema(
    [
        ("photo_id", pa.int64()),
        ("photo_hash", pa.string()),  # the image key (mining.settings.layout.image_key)
        ("url", pa.string()),  # the last address asked
        ("status", pa.string()),  # ok, or the last source's outcome
        ("source", pa.string()),  # the source that served it (null unless ok)
        ("low_res", pa.bool_()),
        ("tried", TRIED),
        ("http_code", pa.int16()),
        ("attempts", pa.int16()),
        ("bytes", pa.int64()),
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("sha256", pa.string()),
        ("elapsed", pa.float64()),
    ]
)


def tar_path(out: Path, index: int) -> Path:
    return out / "tar" / f"shard-{index:05d}.tar"


def image_exists(out: Path, key: str | int, tar_index: int | None = None) -> bool:
    """Is the image stored? In tar mode a shard's tar holds all of its `ok` images. (An int is
    a photo id without a download URL: its key is the id's MD5.)"""
    if tar_index is not None:
        return tar_path(out, tar_index).exists()
    return (out / key_relpath(_key(key))).exists()


def _key(key: str | int) -> str:
    return image_key(key) if isinstance(key, int) else key


def journal_path(out: Path, index: int) -> Path:
    return out / "status" / f"shard-{index:05d}.journal"


class Journal:
    """The `ok` rows of a shard still running, one JSON line each, written after the image:
    a run killed before the shard's status file is written leaves images whose source is
    known; the next run adopts an image only when its bytes match a journal row."""

    def __init__(self, out: Path, index: int) -> None:
        self.path = journal_path(out, index)
        self.old: dict[int, dict] = {}
        if self.path.exists():
            for line in self.path.read_text(errors="replace").splitlines():
                try:
                    row = json.loads(line)
                    self.old[int(row["photo_id"])] = row
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut by the kill
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a")
        self._lock = threading.Lock()

    def add(self, row: dict) -> None:
        line = json.dumps(row, sort_keys=True) + "\n"
        with self._lock:
            self._f.write(line)
            self._f.flush()

    def close(self, remove: bool) -> None:
        self._f.close()
        if remove:
            self.path.unlink(missing_ok=True)


def sweep_debris(out: Path) -> int:
    """Delete temporaries left by a killed run (`.<name>.<random>.tmp`); returns how many."""
    n = 0
    for sub in ("jpg", "tar", "status"):
        root = out / sub
        if not root.is_dir():
            continue
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                if f.startswith(".") and f.endswith(".tmp"):
                    os.unlink(os.path.join(dirpath, f))
                    n += 1
    return n


class ShardSink:
    """Stores the `ok` images of one shard; `existing` lets a rerun adopt stored ones."""

    def __init__(self, out: Path, index: int, tar: bool = False) -> None:
        self.out, self.index, self.tar = out, index, tar
        self._lock = threading.Lock()
        self._tar: tarfile.TarFile | None = None
        self._ctx: Any = None
        self._old: tarfile.TarFile | None = None
        self._carried: dict[str, tarfile.TarInfo] = {}
        if tar:
            final = tar_path(out, index)
            self._ctx = atomic.atomic_path(final)
            tmp = self._ctx.__enter__()
            self._tar = tarfile.open(tmp, "w")
            if final.exists():  # carry the earlier run's images over; the new tar replaces it
                self._old = tarfile.open(final)
                for m in self._old:
                    f = self._old.extractfile(m)
                    if f is not None:
                        self._tar.addfile(m, f)
                        self._carried[m.name] = m

    def existing(self, key: str | int) -> bytes | None:
        """Bytes stored under this key by an earlier (maybe killed) run, if any."""
        key = _key(key)
        if self.tar:  # carried over from the shard's earlier tar
            m = self._carried.get(f"{key}.jpg")
            if m is None or self._old is None:
                return None
            with self._lock:
                f = self._old.extractfile(m)
                return f.read() if f is not None else None
        p = self.out / key_relpath(key)
        try:
            return p.read_bytes()
        except FileNotFoundError:
            return None

    def put(self, key: str | int, data: bytes) -> None:
        key = _key(key)
        if self._tar is None:
            atomic.write_bytes(self.out / key_relpath(key), data)
            return
        info = tarfile.TarInfo(f"{key}.jpg")
        info.size = len(data)
        with self._lock:
            self._tar.addfile(info, io.BytesIO(data))

    def close(self, ok: bool = True) -> None:
        """Finish the shard's tar (rename into place) or drop it when the shard failed."""
        if self._tar is None:
            return
        if self._old is not None:
            self._old.close()
        self._tar.close()
        self._tar = None
        if ok:
            self._ctx.__exit__(None, None, None)
        else:
            self._ctx.__exit__(RuntimeError, RuntimeError("shard failed"), None)


def status_table(rows: list[dict]) -> pa.Table:
    rows = sorted(rows, key=lambda r: r["photo_id"])
    return pa.Table.from_pylist([{n: r.get(n) for n in STATUS_SCHEMA.names} for r in rows], schema=STATUS_SCHEMA)


def write_status(path: Path, rows: list[dict]) -> None:
    atomic.write_parquet(path, status_table(rows))
