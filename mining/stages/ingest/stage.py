"""`mining ingest`: `run` (the files → the Parquet dataset, its quarantine and stats) and
`open_dataset`, `output_schema` (the dataset as written); the package's docstring says how."""


from __future__ import annotations

import collections
import json
import logging
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from mining import __version__
from mining.files import atomic
from mining.errors import UserError
from mining.files.names import STATS
from mining.stages.ingest import sqlite
from mining.stages.ingest.damage import line_reached
from mining.stages.ingest.hashes import HASH_COUNTS, HashJoin, compare
from mining.stages.ingest.output import QUARANTINE_HEADER, PartWriter, escape_field
from mining.stages.ingest.places import PlacesJoin
from mining.stages.ingest.decompress import (READ_ERRORS, LongLine, bz2_decoder, iter_capped, open_stream,
                                          sniff_compression)
from mining.stages.ingest.yfcc import (LONG_LINE_HEAD, MAX_LINE, PLACE_FIELDS, REASONS, SCHEMA, WRONG_FIELD_COUNT, Block,
                                       detect_layout, long_line_block, parse_block)
from mining.console.progress import bar as progress_bar
from mining.compute.threads import in_order

log = logging.getLogger("mining.stages.ingest")  # the stage's name in the run's logs, not this module's

_STAGING_PREFIX = ".ingest-staging-"
# default parser threads (Arrow and numpy release the GIL) and .bz2 decoder threads; blocks
# in flight = this + 1
_WORKERS = max(1, min(4, os.cpu_count() or 1))
_SQLITE_ROW_BYTES = 512  # about a YFCC row's TSV line: a block_size of rows is block_size / this


@dataclass(frozen=True)
class IngestOptions:
    """The stage's settings (the CLI's defaults are these)."""

    rows_per_part: int = 1_000_000  # rows per Parquet part file
    block_size: int = 16 << 20  # bytes parsed at a time (bounds memory; the output does not depend on it)
    compression: str = "snappy"  # Parquet compression: snappy, zstd, lz4, gzip or none


@dataclass(frozen=True)
class _Inputs:
    """The input files, checked readable; `sources`: the SQLite ones, their table inspected."""

    files: list[Path]
    sources: dict[Path, sqlite.Source]
    places: Path | None
    hashes: Path | None


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
    if not (folder / STATS).exists():
        raise UserError(f"not a complete ingest output (no {STATS}): {folder}")
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
        kind = sniff_compression(path)
        if kind:
            raise UserError(_damaged(path, kind, 0, exc)) from None
        raise UserError(f"{what} cannot be read (plain): {path}: {exc}") from None


def _fingerprint(inputs: _Inputs, options: IngestOptions) -> dict[str, Any]:
    """What the output depends on: a rerun with the same fingerprint has nothing to do."""
    def one(p: Path) -> dict[str, Any]:
        st = p.stat()
        return {"path": str(p.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}

    return {
        "inputs": [one(p) for p in inputs.files],
        "places": one(inputs.places) if inputs.places else None,
        "hash": one(inputs.hashes) if inputs.hashes else None,
        "rows_per_part": options.rows_per_part,
        "compression": options.compression,
        "version": __version__,
    }


def _empty_counts() -> dict[str, int]:
    return {r: 0 for r in REASONS}


def _publish(staging: Path, out: Path, stats: dict[str, Any]) -> None:
    """Replace OUT's previous output by the staged one; stats.json goes last (= complete)."""
    (out / STATS).unlink(missing_ok=True)
    for old in out.glob("part-*.parquet"):
        old.unlink()
    (out / "quarantine.tsv").unlink(missing_ok=True)
    for new in sorted(staging.iterdir()):
        os.replace(new, out / new.name)
    atomic.write_json(out / STATS, stats)
    staging.rmdir()


def run(*, paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str],
        places: str | os.PathLike[str] | None = None, hash_file: str | os.PathLike[str] | None = None,
        options: IngestOptions = IngestOptions(), force: bool = False, progress: bool = True,
        workers: int | None = None) -> dict[str, Any]:
    """Ingest YFCC100M dataset files `paths` (TSV: plain/.bz2/.gz, 25- or 23-field; or the
    SQLite file) into the folder OUT; return the stats.

    `places` (the yfcc100m_places file: the same rows in the same order) fills place_country
    and place_locality; `hash_file` (the yfcc100m_hash file, photoid<TAB>hash, the same order)
    fills photo_hash where the dataset file has none (23-field and SQLite inputs).
    `force`: rebuild even if OUT is complete for the same inputs.
    `workers`: parser threads, and decoder threads of a .bz2 input (default min(4, CPUs)).
    The output bytes do not depend on it, nor on `options.block_size`.
    """
    inputs = _checked_inputs(paths, places, hash_file)
    _check_options(options)
    workers = _WORKERS if workers is None else workers
    if workers < 1:
        raise UserError(f"workers must be at least 1, got {workers}")
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"output is not a folder: {out_dir}")
    fingerprint = _fingerprint(inputs, options)
    previous = None if force else _complete(out_dir, fingerprint)
    if previous is not None:
        log.info("%s is already complete for these inputs; nothing to do (--force rebuilds)", out_dir)
        return previous
    with atomic.output_folder(out_dir):  # a failed first run leaves nothing behind
        for stale in out_dir.glob(_STAGING_PREFIX + "*"):  # left by a crashed run
            shutil.rmtree(stale, ignore_errors=True)
        staging = out_dir / f"{_STAGING_PREFIX}{os.getpid()}"
        try:
            staging.mkdir()
            stats = _ingest(inputs, staging, options, progress, workers)
            stats["fingerprint"] = fingerprint
            _publish(staging, out_dir, stats)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return stats


def _checked_inputs(paths: Sequence[str | os.PathLike[str]], places: str | os.PathLike[str] | None,
                    hash_file: str | os.PathLike[str] | None) -> _Inputs:
    """The inputs, each checked readable before anything is written (SQLite files: their table
    and columns too)."""
    files = [Path(p) for p in paths]
    if not files:
        raise UserError("no input files given")
    for f in files:
        _check_input(f, "input file")
    sources = {f: sqlite.inspect(f) for f in files if sqlite.is_sqlite(f)}
    if any(sniff_compression(f) == "bz2" for f in files):
        log.info(".bz2 decoder: %s", bz2_decoder())  # a bad MINING_BZ2_DECODER fails here, before any work
    places_path = Path(places) if places is not None else None
    if places_path is not None:
        _check_input(places_path, "places file")
    hash_path = Path(hash_file) if hash_file is not None else None
    if hash_path is not None:
        _check_input(hash_path, "hash file")
    return _Inputs(files, sources, places_path, hash_path)


def _check_options(options: IngestOptions) -> None:
    if options.rows_per_part < 1:
        raise UserError(f"rows per part must be positive, got {options.rows_per_part}")
    if options.block_size < 1:  # a block of 0 bytes read nothing: an empty dataset, exit 0
        raise UserError("the block size must be positive (--block-size-mb at least 1), "
                        f"got {options.block_size} bytes")


def _complete(out_dir: Path, fingerprint: dict[str, Any]) -> dict[str, Any] | None:
    """The stats of OUT when it is already complete for this fingerprint, else None."""
    stats_path = out_dir / STATS
    if not stats_path.exists():
        return None
    try:
        previous = json.loads(stats_path.read_text())
    except ValueError:
        return None
    return previous if previous.get("fingerprint") == fingerprint else None


class _Sink:
    """Where parsed blocks go, in input order: Parquet parts, quarantine, places, hashes, counts."""

    def __init__(self, writer: PartWriter, quarantine: BinaryIO, places: Any, hashes: Any):
        self.writer, self.quarantine, self.places, self.hashes = writer, quarantine, places, hashes
        self.hash_counts = dict.fromkeys(HASH_COUNTS, 0)
        # of the current file: field counts of its wrong_field_count lines, its first rejected line
        self.field_counts: collections.Counter[int] = collections.Counter()
        self.first_reject: bytes | None = None

    def file_stats(self, path: Path, nfields: int, fmt: str) -> dict[str, Any]:
        self.field_counts, self.first_reject = collections.Counter(), None
        return {"path": str(path), "format": fmt, "fields": nfields,
                "compression": sniff_compression(path) or "none",
                "rows_in": 0, "rows_out": 0, "rows_rejected": 0, "rejected": _empty_counts()}

    def take(self, block: Block, fstats: dict[str, Any], label: bytes) -> None:
        """Write one parsed block; its lines are numbered after the file's previous blocks."""
        table = block.table
        if self.hashes is not None:
            table = self.hashes.fill(table)
        if self.places is not None:
            country, locality = self.places.lookup(table.column("photo_id").combine_chunks())
            table = table.append_column(PLACE_FIELDS[0][0], country).append_column(PLACE_FIELDS[1][0], locality)
        for key, n in compare(table.column("photo_hash").combine_chunks(),
                              table.column("download_url").combine_chunks()).items():
            self.hash_counts[key] += n
        self.writer.write(table)
        offset = fstats["rows_in"]  # lines of this file before the block
        for number, reason, text in block.rejects:
            self.quarantine.write(b"%s\t%d\t%s\t%s\n" % (label, offset + number, reason.encode(), escape_field(text)))
            fstats["rejected"][reason] += 1
            if reason == WRONG_FIELD_COUNT:
                self.field_counts[text.count(b"\t") + 1] += 1
            if self.first_reject is None:
                self.first_reject = text
        fstats["rows_in"] += block.lines
        fstats["rows_out"] += table.num_rows
        fstats["rows_rejected"] += len(block.rejects)


# (a parse job for the pool, its arguments, the progress reached once its block is written)
_Job = tuple[Callable[..., Block], tuple[Any, ...], float]


def _pipeline(jobs: Iterator[_Job], pool: ThreadPoolExecutor, sink: _Sink, fstats: dict[str, Any],
              label: bytes, bar: Any, workers: int) -> float:
    """Run the jobs on the parser threads, a few in flight (bounded memory), and hand their
    blocks to the sink in order; return the progress reached."""
    done = 0.0
    for (_, _, pos), block in in_order(pool, lambda job: job[0](*job[1]), jobs, workers + 1):
        sink.take(block, fstats, label)
        bar.update(pos - done)
        done = pos
    return done


def _ingest_file(path: Path, pool: ThreadPoolExecutor, sink: _Sink, block_size: int, bar: Any,
                 workers: int) -> dict[str, Any]:
    """Stream one TSV dataset file through the parser threads into the sink; return its stats."""
    nfields = detect_layout(path)
    fstats = sink.file_stats(path, nfields, "tsv")
    label = escape_field(str(path).encode("utf-8", "surrogateescape"))
    stream, raw = open_stream(path, threads=workers)
    try:
        # the bar moves by input bytes as blocks are written
        jobs = ((long_line_block, (data.head,), raw.tell()) if isinstance(data, LongLine) else
                (parse_block, (data, nfields), raw.tell()) for data in _read_blocks(path, stream, block_size))
        done = _pipeline(jobs, pool, sink, fstats, label, bar, workers)
    finally:
        stream.close()
        raw.close()
    bar.update(path.stat().st_size - done)
    return fstats


def _ingest_sqlite(source: sqlite.Source, pool: ThreadPoolExecutor, sink: _Sink, block_size: int, bar: Any,
                   workers: int, unit: float) -> dict[str, Any]:
    """Read one SQLite file by rowid ranges on the parser threads into the sink; return its stats.
    The bar moves by `unit` per rowid (1: rows; or the file's bytes spread over its rowids)."""
    path = source.path
    fstats = sink.file_stats(path, 23, "sqlite")
    fstats["table"] = source.table
    if source.extra:
        fstats["extra_columns"] = list(source.extra)
        log.info("%s: table %s has column(s) beyond YFCC's 23, ignored: %s", path, source.table,
                 ", ".join(source.extra))
    label = escape_field(str(path).encode("utf-8", "surrogateescape"))
    reader = sqlite.Reader(source)
    first = source.first or 0
    try:
        jobs = ((reader.read, (lo, hi), (min(hi, source.last or hi) - first + 1) * unit)
                for lo, hi in reader.ranges(max(1, block_size // _SQLITE_ROW_BYTES)))
        done = _pipeline(jobs, pool, sink, fstats, label, bar, workers)
    finally:
        reader.close()
    bar.update(_span(source) * unit - done)
    return fstats


def _span(source: sqlite.Source) -> int:
    """Rowids from the first to the last (the row count of a table without gaps)."""
    return 0 if source.first is None or source.last is None else source.last - source.first + 1


def _all_rejected(fstats: dict[str, Any], field_counts: collections.Counter[int], first: bytes | None) -> str:
    """The one line that says what a file whose every row was rejected looks like."""
    reasons = ", ".join(f"{k}={v}" for k, v in fstats["rejected"].items() if v)
    msg = f"{fstats['path']}: all {fstats['rows_in']} rows rejected ({reasons})"
    if first is not None and first.startswith(sqlite.HEADER):
        return msg + (f": it is a SQLite database inside {fstats['compression']} compression; "
                      "decompress it first (ingest reads the SQLite file as it is)")
    if field_counts:
        counts = ", ".join(f"{n} ({lines} lines)" for n, lines in sorted(field_counts.items()))
        if len(field_counts) == 1:
            counts = str(next(iter(field_counts)))
        msg += f": lines have {counts} tab-separated fields, a YFCC100M dataset file has 23 or 25"
    elif first is not None:
        msg += f"; the first: {first[:100]!r}"
    return msg + "; is this the yfcc100m_dataset file?"


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


def _read_blocks(path: Path, stream: Any, block_size: int) -> Iterable[bytes | LongLine]:
    """`iter_capped` (a line longer than MAX_LINE comes as a LongLine), with a read error (a
    truncated .gz/.bz2, a failing disk) as one line naming the file and the last whole line read."""
    reader = _CountingReader(stream)
    try:
        yield from iter_capped(reader, block_size, MAX_LINE, LONG_LINE_HEAD)
    except _StreamError as exc:
        kind = sniff_compression(path)
        if kind:
            raise UserError(_damaged(path, kind, reader.lines, exc)) from None
        raise UserError(f"{path}: read error after line {reader.lines} ({exc})") from None


def _damaged(path: Path, kind: str, counted: int, exc: BaseException) -> str:
    """The one line for a truncated or corrupt compressed input, naming the last whole line that
    decodes (see mining/stages/ingest/damage.py)."""
    return f"{path}: the {kind} stream is truncated or corrupt after line {line_reached(path, kind, counted)} ({exc})"


def _ingest(inputs: _Inputs, staging: Path, options: IngestOptions, progress: bool,
            workers: int) -> dict[str, Any]:
    """Write the parts and the quarantine into `staging`; return the stats."""
    t0 = time.perf_counter()
    schema = output_schema(inputs.places is not None)
    writer = PartWriter(staging, schema, options.rows_per_part, options.compression)
    places = PlacesJoin(inputs.places) if inputs.places is not None else None
    hashes = HashJoin(inputs.hashes) if inputs.hashes is not None else None
    # the bar counts rows when every input is SQLite (by rowid), else input bytes
    by_rows = len(inputs.sources) == len(inputs.files)
    total = sum(_span(inputs.sources[f]) if by_rows else f.stat().st_size for f in inputs.files)
    bar = progress_bar(total=total, unit="row" if by_rows else "B", unit_scale=True,
                       desc="ingest", disable=not progress)
    try:
        with open(staging / "quarantine.tsv", "wb") as quarantine, ThreadPoolExecutor(workers) as pool:
            quarantine.write(QUARANTINE_HEADER)
            sink = _Sink(writer, quarantine, places, hashes)
            per_file = [_ingest_one(f, inputs, pool, sink, options.block_size, bar, workers, by_rows)
                        for f in inputs.files]
        parts = writer.finish()
    finally:
        bar.close()
        writer.close()
        for joiner in (places, hashes):
            if joiner is not None:
                joiner.close()
    stats = _totals(per_file)
    stats.update({"parts": [p.name for p in parts], "columns": schema.names,
                  # each kept row's photo_hash against flickr.yfcc_hash(download_url) (hashes.compare)
                  "photo_hash": dict(sink.hash_counts), "elapsed_s": round(time.perf_counter() - t0, 3)})
    for key, join, path in (("places", places, inputs.places), ("hash", hashes, inputs.hashes)):
        if join is not None:
            stats[key] = {"path": str(path), "rows_matched": join.matched, "lines_skipped": join.skipped}
            _warn_join(key, join, path, stats)
    return stats


def _ingest_one(f: Path, inputs: _Inputs, pool: ThreadPoolExecutor, sink: _Sink, block_size: int, bar: Any,
                workers: int, by_rows: bool) -> dict[str, Any]:
    """One input file into the sink; its stats (a file whose every row is rejected stops the run)."""
    if f in inputs.sources:
        source = inputs.sources[f]
        unit = 1.0 if by_rows else f.stat().st_size / max(1, _span(source))
        fstats = _ingest_sqlite(source, pool, sink, block_size, bar, workers, unit)
    else:
        fstats = _ingest_file(f, pool, sink, block_size, bar, workers)
    assert fstats["rows_in"] == fstats["rows_out"] + fstats["rows_rejected"]
    if fstats["rows_in"] == 0:
        log.warning("%s has no rows (an empty input adds nothing to the dataset)", f)
    elif fstats["rows_out"] == 0:
        raise UserError(_all_rejected(fstats, sink.field_counts, sink.first_reject))
    return fstats


def _totals(per_file: list[dict[str, Any]]) -> dict[str, Any]:
    """The rows of every file summed, and the files' own stats."""
    total_rejected = _empty_counts()
    for fstats in per_file:
        for reason, n in fstats["rejected"].items():
            total_rejected[reason] += n
    return {
        "rows_in": sum(s["rows_in"] for s in per_file),
        "rows_out": sum(s["rows_out"] for s in per_file),
        "rows_rejected": sum(s["rows_rejected"] for s in per_file),
        "rejected": total_rejected,
        "files": per_file,
    }


def _warn_join(key: str, join: Any, path: Path, stats: dict[str, Any]) -> None:
    """A warning when the places or hash file matched no row, or left kept rows without a hash."""
    skipped = (f"; {join.skipped} of its {join.lines} lines were skipped (not photoid<TAB>{key}"
               f"{' of 1-64 hex digits' if key == 'hash' else ''})" if join.skipped else "")
    if stats["rows_out"] and not join.matched:
        log.warning("no row matched the %s file %s (not the same rows?)%s", key, path, skipped)
    elif key == "hash" and stats["photo_hash"]["missing"]:
        log.warning("%d kept rows have no hash: the hash file %s has no line for their photo ids near their "
                    "place in the dataset's order (within %d lines)%s", stats["photo_hash"]["missing"],
                    path, join.slack, skipped)
