"""Reading YFCC100M metadata files: plain, `.bz2` or `.gz` (sniffed from the magic bytes),
decompressed on threads of their own, handed out as blocks of whole lines."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa

from mining.errors import UserError


def sniff_compression(path: Path) -> str | None:
    """'bz2', 'gzip' or None, from the file's magic bytes (names like `dataset-0` lack suffixes)."""
    with open(path, "rb") as f:
        head = f.read(3)
    if head.startswith(b"BZh"):
        return "bz2"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    return None


# What a decompressor raises on a truncated or corrupt stream: Arrow's ArrowException/OSError,
# isal's EOFError or zlib.error-like errors, indexed_bzip2's RuntimeError/ValueError (a C++
# exception surfaced by Cython).
READ_ERRORS = (OSError, EOFError, RuntimeError, ValueError, zlib.error, pa.ArrowException)


class _Position:
    """`tell()` in compressed bytes read so far (drives the progress bar) and `close()`."""

    def __init__(self, tell: Callable[[], int], close: Callable[[], None] = lambda: None):
        self.tell, self.close = tell, close


BZ2_DECODERS = ("auto", "lbzip2", "indexed_bzip2")
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)  # Linux


def bz2_decoder() -> str:
    """The `.bz2` decoder `open_stream` uses: `MINING_BZ2_DECODER` (auto, lbzip2 or
    indexed_bzip2); auto = lbzip2 when it is on PATH (measured here: 16.5 vs 20.7 CPU s for
    the same 91 MB file, 8.5 s on 2 threads), else indexed_bzip2 (a Python dependency)."""
    choice = os.environ.get("MINING_BZ2_DECODER", "auto") or "auto"
    if choice not in BZ2_DECODERS:
        raise UserError(f"MINING_BZ2_DECODER must be one of {', '.join(BZ2_DECODERS)}, got {choice!r}")
    if choice == "auto":
        return "lbzip2" if shutil.which("lbzip2") else "indexed_bzip2"
    if choice == "lbzip2" and not shutil.which("lbzip2"):
        raise UserError("MINING_BZ2_DECODER=lbzip2 but lbzip2 is not on PATH (apt-get install lbzip2)")
    return choice


class _Lbzip2Stream:
    """The decompressed bytes of a `.bz2` file from an `lbzip2 -d` process (its own threads,
    outside the GIL). The file is the child's stdin, so the parent's descriptor shares its
    offset (`tell`). A non-zero exit (truncated or corrupt stream) is an OSError with
    lbzip2's message at the end of the stream, where the other decoders raise theirs."""

    def __init__(self, path: Path, threads: int):
        self._file = open(path, "rb")  # noqa: SIM115 (closed in close())
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 (a pipe could fill and block lbzip2)
        try:
            self._proc = subprocess.Popen(
                [shutil.which("lbzip2") or "lbzip2", "-d", "-c", "-n", str(max(1, threads))],
                stdin=self._file, stdout=subprocess.PIPE, stderr=self._err, bufsize=1 << 20,
            )
        except BaseException:
            self._file.close()
            self._err.close()
            raise
        assert self._proc.stdout is not None
        self._out = self._proc.stdout
        try:  # a 1 MiB pipe instead of 64 KiB: 16x fewer sleeps and wake-ups on both sides
            fcntl.fcntl(self._out.fileno(), _F_SETPIPE_SZ, 1 << 20)
        except OSError:  # above /proc/sys/fs/pipe-max-size for this user: the default pipe works
            pass

    def read(self, n: int = -1) -> bytes:
        data = self._out.read(n)
        # a short read is the end of lbzip2's output: hand out what it wrote (whole, checked
        # bzip2 blocks, in order) and tell a failure on the next call, so that the error says
        # how far the good part went
        if not data:
            if self._proc.wait() != 0:
                self._err.seek(0)
                message = self._err.read().decode("utf-8", "replace").strip().splitlines()
                raise OSError(f"lbzip2 exit {self._proc.returncode}: {message[-1] if message else ''}")
        return data

    def tell_compressed(self) -> int:
        return os.lseek(self._file.fileno(), 0, os.SEEK_CUR)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._out.close()
        self._file.close()
        self._err.close()


def open_stream(path: Path, threads: int = 0) -> tuple[Any, Any]:
    """(decompressed stream, raw position): `raw.tell()` is how far into the file (compressed
    bytes) the stream has read; close both.

    `threads` = 0: Arrow's single-threaded decompressors (cheap to open; for sniffing and
    short reads). `threads` >= 1: `.bz2` through lbzip2 (a separate process) or indexed_bzip2
    (see `bz2_decoder`) with that many decoder threads (bzip2 blocks are independent: decoded
    in parallel, handed out in order), `.gz` through ISA-L (`isal.igzip_threaded`, ~2x zlib's
    speed) decompressing on a thread of its own (gzip cannot be split; rapidgzip can, but
    returns a truncated .gz's first part without an error, so it is not used). The
    decompressed bytes are the same whichever is used.
    """
    codec = sniff_compression(path)
    if threads <= 0 or codec is None:
        raw = pa.OSFile(str(path), "rb")
        return (pa.CompressedInputStream(raw, codec) if codec else raw), raw
    if codec == "bz2":
        if bz2_decoder() == "lbzip2":
            pipe = _Lbzip2Stream(path, threads)
            return pipe, _Position(pipe.tell_compressed)
        import indexed_bzip2

        stream = indexed_bzip2.open(str(path), parallelization=threads)
        reached = [0]

        def tell() -> int:  # in bits; it falls back to 0 near the end of a multi-stream file
            reached[0] = max(reached[0], stream.tell_compressed() // 8)
            return reached[0]

        return stream, _Position(tell)
    import isal.igzip_threaded

    raw_file = open(path, "rb")  # noqa: SIM115 (closed by the caller, through `raw`)
    try:
        stream = isal.igzip_threaded.open(raw_file, "rb", threads=1, block_size=1 << 20)
    except BaseException:
        raw_file.close()
        raise
    return stream, _Position(raw_file.tell, raw_file.close)


def iter_blocks(stream: pa.NativeFile, block_size: int, max_line: int) -> Iterator[bytes]:
    """Yield chunks of whole lines (each ends with a newline), about `block_size` bytes each."""
    leftover = b""
    while True:
        chunk = stream.read(block_size)
        if not chunk:
            break
        data = leftover + chunk if leftover else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) > max_line:
                raise UserError(f"a line is longer than {max_line} bytes (not a YFCC100M dataset file?)")
            leftover = data
            continue
        if cut == len(data) - 1:
            yield data
            leftover = b""
        else:
            yield data[: cut + 1]
            leftover = data[cut + 1 :]
    if leftover:
        yield leftover + b"\n"


@dataclass(frozen=True)
class LongLine:
    """A line longer than `iter_capped`'s limit, in its place among the blocks: its first bytes
    and its length (without the newline); the rest of it was read and let go."""

    head: bytes
    length: int


def iter_capped(stream: Any, block_size: int, max_line: int, head: int = 1024) -> Iterator[bytes | LongLine]:
    """`iter_blocks`, except that a line longer than `max_line` bytes is never held whole: it
    comes out as a LongLine (its first `head` bytes) between the blocks of the lines around it.
    Memory stays within `block_size + max_line` whatever a line holds."""
    leftover = b""
    skipping: tuple[bytes, int] | None = None  # inside a long line: its head and the bytes seen
    while True:
        chunk = stream.read(block_size)
        if not chunk:
            break
        if skipping is not None:
            nl = chunk.find(b"\n")
            if nl < 0:
                skipping = (skipping[0], skipping[1] + len(chunk))
                continue
            yield LongLine(skipping[0], skipping[1] + nl)
            skipping, chunk = None, chunk[nl + 1:]
        data = leftover + chunk if leftover else chunk
        cut = data.rfind(b"\n")
        if cut >= 0:
            yield from _split_long(data[: cut + 1], max_line, head)
        leftover = data[cut + 1:]
        if len(leftover) > max_line:
            skipping, leftover = (leftover[:head], len(leftover)), b""
    if skipping is not None:
        yield LongLine(*skipping)
    elif leftover:
        yield leftover + b"\n"


def _split_long(block: bytes, max_line: int, head: int) -> Iterator[bytes | LongLine]:
    """A block of whole lines, with each line longer than `max_line` as a LongLine in its place."""
    if len(block) <= max_line + 1:
        if block:
            yield block
        return
    nl = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    starts = np.concatenate(([0], nl[:-1] + 1))
    pos = 0
    for k in np.flatnonzero(nl - starts > max_line):
        s, e = int(starts[k]), int(nl[k])
        if s > pos:
            yield block[pos:s]
        yield LongLine(block[s: s + head], e - s)
        pos = e + 1
    if pos < len(block):
        yield block[pos:]
