"""`mining ingest`: YFCC100M `yfcc100m_dataset` files → a typed Parquet dataset.

Output folder (see docs/formats.md): `part-NNNNN.parquet`, `quarantine.tsv` (file, line,
reason, raw line of every rejected row; backslash escapes, read it with `read_quarantine`) and
`stats.json` (written last: its presence means
the folder is complete). Everything is first written to a hidden staging folder inside OUT
and moved into place at the end, so OUT never mixes two runs; rerunning on unchanged inputs
is a no-op.

Memory stays bounded: files are read in blocks of `block_size` bytes, at most a few blocks
are in flight (parsed on a worker thread while the previous one is written), and the
places file is merged in a sliding window.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mining import __version__, atomic
from mining.errors import UserError
from mining.ingest.yfcc import (
    PLACE_FIELDS,
    READ_ERRORS,
    Block,
    REASONS,
    SCHEMA,
    bz2_decoder,
    detect_layout,
    iter_blocks,
    open_stream,
    parse_block,
    sniff_compression,
)

__all__ = ["ingest", "open_dataset", "output_schema", "read_quarantine", "REASONS", "SCHEMA"]

log = logging.getLogger(__name__)

QUARANTINE_HEADER = b"file\tline\treason\traw_line\n"
_STAGING_PREFIX = ".ingest-staging-"
# default parser threads (Arrow and numpy release the GIL) and .bz2 decoder threads; blocks
# in flight = this + 1
_WORKERS = max(1, min(4, os.cpu_count() or 1))
_DICTIONARY = ["license_name", "license_url", "extension", "place_country"]
_STATISTICS = ["photo_id", "longitude", "latitude", "accuracy", "date_uploaded", "marker"]


# quarantine.tsv fields are escaped so that a record is one line of exactly four fields,
# whatever bytes a file name or a raw line holds (tabs, lone CRs, newlines in file names)
_ESCAPES = ((b"\\", b"\\\\"), (b"\t", b"\\t"), (b"\n", b"\\n"), (b"\r", b"\\r"))
_UNESCAPES = {b"\\": b"\\", b"t": b"\t", b"n": b"\n", b"r": b"\r"}


def escape_field(value: bytes) -> bytes:
    """A quarantine.tsv field: backslash, TAB, LF and CR written as `\\\\`, `\\t`, `\\n`, `\\r`."""
    for raw, escaped in _ESCAPES:
        if raw in value:
            value = value.replace(raw, escaped)
    return value


def unescape_field(value: bytes) -> bytes:
    """The inverse of `escape_field`."""
    if b"\\" not in value:
        return value
    return re.sub(rb"\\(.)", lambda m: _UNESCAPES.get(m.group(1), b"\\" + m.group(1)), value, flags=re.S)


def read_quarantine(folder_or_file: str | os.PathLike[str]) -> list[tuple[str, int, str, bytes]]:
    """The rows of an ingest output's quarantine.tsv: (file, line, reason, raw line), unescaped."""
    path = Path(folder_or_file)
    if path.is_dir():
        path = path / "quarantine.tsv"
    lines = path.read_bytes().split(b"\n")
    if lines[0] + b"\n" != QUARANTINE_HEADER:
        raise UserError(f"not a quarantine file (bad header): {path}")
    rows = []
    for line in lines[1:]:
        if not line:
            continue
        name, number, reason, raw = line.split(b"\t")
        rows.append((unescape_field(name).decode("utf-8", "surrogateescape"), int(number), reason.decode(),
                     unescape_field(raw)))
    return rows


def output_schema(with_places: bool) -> pa.Schema:
    """The Parquet schema `ingest` writes (place columns only with `--places`)."""
    return pa.schema(list(SCHEMA) + ([pa.field(n, t) for n, t in PLACE_FIELDS] if with_places else []))


def open_dataset(folder: str | os.PathLike[str]) -> "pyarrow.dataset.Dataset":
    """The ingested rows of an ingest output folder, in input order, as a pyarrow dataset.

    Use this (or the `part-*.parquet` glob) rather than `pyarrow.dataset.dataset(folder)`:
    the folder also holds stats.json and quarantine.tsv, which are not Parquet.
    """
    import pyarrow.dataset

    folder = Path(folder)
    if not (folder / "stats.json").exists():
        raise UserError(f"not a complete ingest output (no stats.json): {folder}")
    parts = sorted(str(p) for p in folder.glob("part-*.parquet"))
    return pyarrow.dataset.dataset(parts, format="parquet")


def _check_input(path: Path, what: str) -> None:
    """Fail early, in one line, on a file that cannot be read (before anything is written)."""
    if not path.exists():
        raise UserError(f"{what} not found: {path}")
    if not path.is_file():
        raise UserError(f"{what} is not a file: {path}")
    try:
        stream, raw = open_stream(path)
        try:
            stream.read(1)
        finally:
            stream.close()
            raw.close()
    except PermissionError:
        raise UserError(f"{what} is not readable (permission denied): {path}") from None
    except READ_ERRORS as exc:
        raise UserError(f"{what} cannot be read ({sniff_compression(path) or 'plain'}): {path}: {exc}") from None


def _fingerprint(paths: list[Path], places: Path | None, rows_per_part: int, compression: str) -> dict[str, Any]:
    """What the output depends on: a rerun with the same fingerprint has nothing to do."""
    def one(p: Path) -> dict[str, Any]:
        st = p.stat()
        return {"path": str(p.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}

    return {
        "inputs": [one(p) for p in paths],
        "places": one(places) if places else None,
        "rows_per_part": rows_per_part,
        "compression": compression,
        "version": __version__,
    }


class _PartWriter:
    """Parquet parts of at most `rows_per_part` rows: part-00000.parquet, part-00001.parquet, ..."""

    def __init__(self, folder: Path, schema: pa.Schema, rows_per_part: int, compression: str):
        self.folder, self.schema, self.rows_per_part, self.compression = folder, schema, rows_per_part, compression
        self.parts: list[Path] = []
        self._writer: pq.ParquetWriter | None = None
        self._rows = 0

    def _open(self) -> None:
        path = self.folder / f"part-{len(self.parts):05d}.parquet"
        self.parts.append(path)
        self._writer = pq.ParquetWriter(
            path, self.schema, compression=self.compression,
            # dictionaries and min/max statistics only where they pay: few distinct values,
            # or columns that readers filter on; elsewhere they cost time and bytes
            use_dictionary=[n for n in _DICTIONARY if n in self.schema.names],
            write_statistics=[n for n in _STATISTICS if n in self.schema.names],
        )
        self._rows = 0

    def write(self, table: pa.Table) -> None:
        while table.num_rows:
            if self._writer is None or self._rows >= self.rows_per_part:
                self.close()
                self._open()
            take = min(table.num_rows, self.rows_per_part - self._rows)
            assert self._writer is not None
            self._writer.write_table(table.slice(0, take))
            self._rows += take
            table = table.slice(take)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def finish(self) -> list[Path]:
        if not self.parts:  # no rows at all: still a readable, typed (empty) dataset
            self._open()
        self.close()
        return self.parts


def _empty_counts() -> dict[str, int]:
    return {r: 0 for r in REASONS}


def _publish(staging: Path, out: Path, stats: dict[str, Any]) -> None:
    """Replace OUT's previous output by the staged one; stats.json goes last (= complete)."""
    (out / "stats.json").unlink(missing_ok=True)
    for old in out.glob("part-*.parquet"):
        old.unlink()
    (out / "quarantine.tsv").unlink(missing_ok=True)
    for new in sorted(staging.iterdir()):
        os.replace(new, out / new.name)
    atomic.write_json(out / "stats.json", stats)
    staging.rmdir()


def ingest(
    paths: Iterable[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    places: str | os.PathLike[str] | None = None,
    *,
    rows_per_part: int = 1_000_000,
    block_size: int = 16 << 20,
    compression: str = "snappy",
    force: bool = False,
    progress: bool = True,
    workers: int | None = None,
) -> dict[str, Any]:
    """Ingest YFCC100M dataset files (plain/.bz2/.gz, 25- or 23-field) into OUT; return the stats.

    `places`: the `yfcc100m_places` file covering the same rows in the same order.
    `force`: rebuild even if OUT is complete for the same inputs.
    `workers`: parser threads, and decoder threads of a .bz2 input (default min(4, CPUs)).
    The output bytes do not depend on it.
    """
    files = [Path(p) for p in paths]
    if not files:
        raise UserError("no input files given")
    for f in files:
        _check_input(f, "input file")
    if any(sniff_compression(f) == "bz2" for f in files):
        log.info(".bz2 decoder: %s", bz2_decoder())  # a bad MINING_BZ2_DECODER fails here, before any work
    places_path = Path(places) if places is not None else None
    if places_path is not None:
        _check_input(places_path, "places file")
    if rows_per_part < 1:
        raise UserError(f"rows per part must be positive, got {rows_per_part}")
    workers = _WORKERS if workers is None else workers
    if workers < 1:
        raise UserError(f"workers must be at least 1, got {workers}")

    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"output is not a folder: {out_dir}")
    fingerprint = _fingerprint(files, places_path, rows_per_part, compression)
    stats_path = out_dir / "stats.json"
    if stats_path.exists() and not force:
        try:
            previous = json.loads(stats_path.read_text())
        except ValueError:
            previous = {}
        if previous.get("fingerprint") == fingerprint:
            log.info("%s is already complete for these inputs; nothing to do (--force rebuilds)", out_dir)
            return previous

    with atomic.output_folder(out_dir):  # a failed first run leaves nothing behind
        for stale in out_dir.glob(_STAGING_PREFIX + "*"):  # left by a crashed run
            shutil.rmtree(stale, ignore_errors=True)
        staging = out_dir / f"{_STAGING_PREFIX}{os.getpid()}"
        try:
            staging.mkdir()
            stats = _run(files, staging, places_path, rows_per_part, block_size, compression, progress,
                         workers)
            stats["fingerprint"] = fingerprint
            _publish(staging, out_dir, stats)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return stats


class _Sink:
    """Where parsed blocks go, in input order: Parquet parts, quarantine, places, counts."""

    def __init__(self, writer: _PartWriter, quarantine: BinaryIO, joiner: Any):
        self.writer, self.quarantine, self.joiner = writer, quarantine, joiner

    def file_stats(self, path: Path, nfields: int) -> dict[str, Any]:
        return {"path": str(path), "fields": nfields, "compression": sniff_compression(path) or "none",
                "rows_in": 0, "rows_out": 0, "rows_rejected": 0, "rejected": _empty_counts()}

    def take(self, block: Block, fstats: dict[str, Any], label: bytes) -> None:
        """Write one parsed block; its lines are numbered after the file's previous blocks."""
        table = block.table
        if self.joiner is not None:
            country, locality = self.joiner.lookup(table.column("photo_id").combine_chunks())
            table = table.append_column(PLACE_FIELDS[0][0], country).append_column(PLACE_FIELDS[1][0], locality)
        self.writer.write(table)
        offset = fstats["rows_in"]  # lines of this file before the block
        for number, reason, text in block.rejects:
            self.quarantine.write(b"%s\t%d\t%s\t%s\n" % (label, offset + number, reason.encode(), escape_field(text)))
            fstats["rejected"][reason] += 1
        fstats["rows_in"] += block.lines
        fstats["rows_out"] += table.num_rows
        fstats["rows_rejected"] += len(block.rejects)


def _ingest_file(path: Path, pool: ThreadPoolExecutor, sink: _Sink, block_size: int, bar: Any,
                 workers: int) -> dict[str, Any]:
    """Stream one dataset file through the parser threads into the sink; return its stats."""
    nfields = detect_layout(path)
    fstats = sink.file_stats(path, nfields)
    label = escape_field(str(path).encode("utf-8", "surrogateescape"))
    stream, raw = open_stream(path, threads=workers)
    # (parsed block, input bytes read up to its end): the bar moves as blocks are written
    pending: collections.deque[tuple[Future[Block], int]] = collections.deque()
    done = 0

    def take_oldest() -> None:
        nonlocal done
        future, pos = pending.popleft()
        sink.take(future.result(), fstats, label)
        bar.update(pos - done)
        done = pos

    try:
        for data in _read_blocks(path, stream, block_size):
            pending.append((pool.submit(parse_block, data, nfields), raw.tell()))
            while len(pending) > workers:  # bounded memory: a few blocks in flight
                take_oldest()
        while pending:
            take_oldest()
    finally:
        for future, _ in pending:
            future.cancel()
        stream.close()
        raw.close()
    bar.update(path.stat().st_size - done)
    if fstats["rows_in"] == 0:
        log.warning("%s has no rows (an empty input adds nothing to the dataset)", path)
    return fstats


class _StreamError(Exception):
    """A decompressor's or the disk's error while reading an input (wraps the original)."""


class _CountingReader:
    """Reads a stream in pieces of at most 1 MiB, counting the lines it has handed out, so that
    a read error can say how far the file was read."""

    def __init__(self, stream: Any):
        self.stream, self.lines = stream, 0

    def read(self, n: int) -> bytes:
        pieces: list[bytes] = []
        got = 0
        while got < n:
            try:
                piece = self.stream.read(min(n - got, 1 << 20))
            except READ_ERRORS as exc:
                raise _StreamError(str(exc) or type(exc).__name__) from exc
            if not piece:
                break
            # numpy counts about 4x faster than bytes.count: this runs over every input byte
            self.lines += int(np.count_nonzero(np.frombuffer(piece, np.uint8) == 10))
            pieces.append(piece)
            got += len(piece)
        return b"".join(pieces)


def _read_blocks(path: Path, stream: Any, block_size: int) -> Iterable[bytes]:
    """`iter_blocks`, with a read error (a truncated .gz/.bz2, a failing disk) as one line
    naming the file and the last whole line read."""
    reader = _CountingReader(stream)
    try:
        yield from iter_blocks(reader, block_size, max(block_size, 1 << 28))  # type: ignore[arg-type]
    except _StreamError as exc:
        kind = sniff_compression(path)
        what = f"the {kind} stream is truncated or corrupt" if kind else "read error"
        raise UserError(f"{path}: {what} after line {reader.lines} ({exc})") from None


def _run(files: list[Path], staging: Path, places_path: Path | None, rows_per_part: int,
         block_size: int, compression: str, progress: bool, workers: int) -> dict[str, Any]:
    from mining.progress import bar as progress_bar

    from mining.ingest.places import PlacesJoin

    t0 = time.perf_counter()
    schema = output_schema(places_path is not None)
    writer = _PartWriter(staging, schema, rows_per_part, compression)
    joiner = PlacesJoin(places_path) if places_path is not None else None
    per_file: list[dict[str, Any]] = []
    bar = progress_bar(total=sum(f.stat().st_size for f in files), unit="B", unit_scale=True,
                       desc="ingest", disable=not progress)
    try:
        with open(staging / "quarantine.tsv", "wb") as quarantine, ThreadPoolExecutor(workers) as pool:
            quarantine.write(QUARANTINE_HEADER)
            sink = _Sink(writer, quarantine, joiner)
            for f in files:
                fstats = _ingest_file(f, pool, sink, block_size, bar, workers)
                assert fstats["rows_in"] == fstats["rows_out"] + fstats["rows_rejected"]
                per_file.append(fstats)
        parts = writer.finish()
    finally:
        bar.close()
        writer.close()
        if joiner is not None:
            joiner.close()

    total_rejected = _empty_counts()
    for fstats in per_file:
        for reason, n in fstats["rejected"].items():
            total_rejected[reason] += n
    stats: dict[str, Any] = {
        "rows_in": sum(s["rows_in"] for s in per_file),
        "rows_out": sum(s["rows_out"] for s in per_file),
        "rows_rejected": sum(s["rows_rejected"] for s in per_file),
        "rejected": total_rejected,
        "files": per_file,
        "parts": [p.name for p in parts],
        "columns": schema.names,
        "elapsed_s": round(time.perf_counter() - t0, 3),
    }
    if joiner is not None:
        stats["places"] = {"path": str(places_path), "rows_matched": joiner.matched,
                           "lines_skipped": joiner.skipped}
        if stats["rows_out"] and not joiner.matched:
            log.warning("no row matched the places file %s (not the same rows?)", places_path)
    return stats
