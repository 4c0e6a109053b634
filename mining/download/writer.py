"""Where verified bytes go: atomic files in the R1M layout, or one tar per shard.

Both are crash-safe: a file only appears under its final name once complete (`mining.atomic`),
and a shard's tar is built under a temporary name and renamed when the shard ends, so a
SIGKILL leaves only `.tmp` debris that the next run sweeps away.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa

from mining import atomic
from mining.layout import image_key, image_relpath

STATUS_SCHEMA = pa.schema(
    [
        ("photo_id", pa.int64()),
        ("url", pa.string()),
        ("status", pa.string()),
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


def image_exists(out: Path, photo_id: int, tar_index: int | None = None) -> bool:
    """Is the image stored? In tar mode a shard's tar holds all of its `ok` images."""
    if tar_index is not None:
        return tar_path(out, tar_index).exists()
    return (out / image_relpath(photo_id)).exists()


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

    def existing(self, photo_id: int) -> bytes | None:
        """Bytes stored for this photo by an earlier (maybe killed) run, if any."""
        if self.tar:  # carried over from the shard's earlier tar
            m = self._carried.get(f"{image_key(photo_id)}.jpg")
            if m is None or self._old is None:
                return None
            with self._lock:
                f = self._old.extractfile(m)
                return f.read() if f is not None else None
        p = self.out / image_relpath(photo_id)
        try:
            return p.read_bytes()
        except FileNotFoundError:
            return None

    def put(self, photo_id: int, data: bytes) -> None:
        if self._tar is None:
            atomic.write_bytes(self.out / image_relpath(photo_id), data)
            return
        info = tarfile.TarInfo(f"{image_key(photo_id)}.jpg")
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
    return pa.Table.from_pylist(rows, schema=STATUS_SCHEMA)


def write_status(path: Path, rows: list[dict]) -> None:
    atomic.write_parquet(path, status_table(rows))
