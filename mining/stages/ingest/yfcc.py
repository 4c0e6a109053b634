"""YFCC100M `yfcc100m_dataset` rows → typed Arrow tables, one block of lines at a time.

Splitting is done by `pyarrow.csv` (C++, multi-threaded); conversions and checks are
vectorised `pyarrow.compute`/numpy over whole columns. The CSV reader does not report the
line number of a row it skips, but the quarantine needs it: the skipped rows' texts are
found in the block (C-speed `bytes.find`/`count`), and the kept rows' numbers follow from
those. Blocks where that cannot work (a skipped row with invalid UTF-8, stray CRs) take an
exact but slower path that splits every line with `split_pattern`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv  # noqa: F401  (pa.csv)

from mining.photos import flickr
from mining.stages.ingest.formdecode import HEX_DIGITS, binary_buffers, form_decode, split_decode, to_utf8
from mining.stages.ingest.numbers import parse_floats, parse_ints
from mining.stages.ingest.decompress import READ_ERRORS, open_stream

# Field order of the current release (25 fields); the older Webscope files lack the first
# (line number) and the third (photo hash). Longitude comes before latitude.
FIELDS_25 = [
    "line_number", "photo_id", "photo_hash", "user_nsid", "user_nickname", "date_taken",
    "date_uploaded", "capture_device", "title", "description", "user_tags", "machine_tags",
    "longitude", "latitude", "accuracy", "page_url", "download_url", "license_name",
    "license_url", "server_id", "farm_id", "secret", "secret_original", "extension", "marker",
]
FIELDS_23 = [f for f in FIELDS_25 if f not in ("line_number", "photo_hash")]
LAYOUTS = {25: FIELDS_25, 23: FIELDS_23}

SCHEMA = pa.schema([
    ("photo_id", pa.int64()),
    ("photo_hash", pa.string()),
    ("user_nsid", pa.string()),
    ("user_nickname", pa.string()),
    ("date_taken", pa.string()),
    ("date_uploaded", pa.int64()),
    ("capture_device", pa.string()),
    ("title", pa.string()),
    ("description", pa.string()),
    ("user_tags", pa.list_(pa.string())),
    ("machine_tags", pa.list_(pa.string())),
    ("longitude", pa.float64()),
    ("latitude", pa.float64()),
    ("accuracy", pa.int8()),
    ("page_url", pa.string()),
    ("download_url", pa.string()),
    ("license_name", pa.string()),
    ("license_url", pa.string()),
    ("server_id", pa.int32()),
    ("farm_id", pa.int32()),
    ("secret", pa.string()),
    ("secret_original", pa.string()),
    ("extension", pa.string()),
    ("marker", pa.int8()),
])
PLACE_FIELDS = [("place_country", pa.string()), ("place_locality", pa.string())]

DECODED_TEXT = {"user_nickname", "capture_device", "title", "description", "license_name"}
TAG_LISTS = {"user_tags", "machine_tags"}
_PLAIN_TEXT = {
    f.name for f in SCHEMA if pa.types.is_string(f.type) and f.name not in DECODED_TEXT
}

# A line longer than this (so any field longer than this) is quarantined as line_too_long
# without being parsed or held whole (decompress.iter_capped), its first LONG_LINE_HEAD bytes as
# its raw line: one value cannot take memory past the block size. YFCC100M's lines are ~0.5 kB.
MAX_LINE = 1 << 20
LONG_LINE_HEAD = 1024

# Reject reasons, in priority order: a row gets the earliest of those that apply.
LINE_TOO_LONG = "line_too_long"
WRONG_FIELD_COUNT = "wrong_field_count"
CONTROL_CHARACTER = "control_character"  # a SQLite value holding a TAB, LF or CR (not a TSV field)
NUL_BYTE = "nul_byte"  # a NUL byte in any field, raw or %00-decoded
BAD_PHOTO_ID = "bad_photo_id"  # unparsable, or not positive
BAD_COORDINATES = "bad_coordinates"  # unparsable, or only one of longitude/latitude
LATITUDE_OUT_OF_RANGE = "latitude_out_of_range"
LONGITUDE_OUT_OF_RANGE = "longitude_out_of_range"
BAD_URL_FIELD = "bad_url_field"  # server/farm not digits, secrets not hex, unknown extension
BAD_ENCODING = "bad_encoding"  # invalid UTF-8 or a bad %-escape
BAD_NUMBER = "bad_number"  # another numeric field (date uploaded, accuracy, marker) unparsable
OUT_OF_DOMAIN = "out_of_domain"  # marker not 0/1, accuracy not 0-16 (mining.photos.flickr)
REASONS = [
    LINE_TOO_LONG, WRONG_FIELD_COUNT, CONTROL_CHARACTER, NUL_BYTE, BAD_PHOTO_ID, BAD_COORDINATES, LATITUDE_OUT_OF_RANGE,
    LONGITUDE_OUT_OF_RANGE, BAD_URL_FIELD, BAD_ENCODING, BAD_NUMBER, OUT_OF_DOMAIN,
]
_EXTENSION_VALUES = pa.array(flickr.EXTENSION_VALUES, pa.string())

_NL, _TAB, _CR = 10, 9, 13


def detect_layout(path: Path, sample_bytes: int = 1 << 20) -> int:
    """25 or 23: the field count most lines at the start of the file have (25 if none)."""
    stream, raw = open_stream(path)
    chunks: list[bytes] = []
    try:
        while sum(map(len, chunks)) < sample_bytes:
            chunk = stream.read(min(sample_bytes, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
    except READ_ERRORS:
        pass  # a truncated stream: decide from what was read; the ingest reports the error
    finally:
        stream.close()
        raw.close()
    head = b"".join(chunks)
    lines = head.split(b"\n")[:-1] if b"\n" in head else [head]
    counts = {23: 0, 25: 0}
    for line in lines[:1000]:
        n = line.count(b"\t") + 1
        if n in counts:
            counts[n] += 1
    return 23 if counts[23] > counts[25] else 25


@dataclass
class Block:
    """A parsed block: the good rows as a table, and the rejected rows' (line, reason, raw)."""

    table: pa.Table
    rejects: list[tuple[int, str, bytes]] = field(default_factory=list)
    lines: int = 0


def _exact_split(data: bytes, nfields: int) -> tuple[dict[str, pa.Array], list[tuple[int, bytes]], int]:
    """Slow path: split every line with numpy/`split_pattern`; exact for any bytes.

    Returns (raw binary columns of the rows with the right field count, [(line index,
    raw line)] of the others, number of lines).
    """
    buf = np.frombuffer(data, dtype=np.uint8).copy()
    nl = np.flatnonzero(buf == _NL)
    buf[nl] = _TAB  # the newline becomes a separator: every line gets one extra, empty field
    offsets = np.concatenate(([0], nl + 1)).astype(np.int32)
    lines = pa.Array.from_buffers(pa.binary(), len(nl), [None, pa.py_buffer(offsets), pa.py_buffer(buf)])
    split = pc.split_pattern(lines, "\t")
    counts = pc.list_value_length(split).to_numpy(zero_copy_only=False)
    right = counts == nfields + 1
    good = np.flatnonzero(right)
    starts = split.offsets.to_numpy()[good]
    raw = {name: split.values.take(pa.array(starts + j)) for j, name in enumerate(LAYOUTS[nfields])}
    wrong = [(int(i), data[offsets[i] : offsets[i + 1] - 1]) for i in np.flatnonzero(~right)]
    return raw, wrong, len(nl)


def is_utf8(data: bytes) -> bool:
    """Whether a whole block is valid UTF-8 (Arrow's SIMD validation, zero-copy)."""
    one = pa.Array.from_buffers(
        pa.binary(), 1, [None, pa.py_buffer(np.array([0, len(data)], dtype=np.int32)), pa.py_buffer(data)]
    )
    try:
        one.cast(pa.string())
        return True
    except pa.ArrowInvalid:
        return False


# long: the hot path of ingest, one pass over a block's bytes (benchmarks/ingest_geofilter.py measures it)
def _fast_split(data: bytes, nfields: int) -> tuple[dict[str, pa.Array], list[tuple[int, bytes]], int] | None:
    """Fast path: `pyarrow.csv` splits; None when the block needs the exact path."""
    if b"\r" in data or not is_utf8(data):
        return None  # the CSV reader would split at a lone CR; its skip handler needs UTF-8
    names = LAYOUTS[nfields]
    skipped: list[str] = []

    def on_invalid(row: pa.csv.InvalidRow) -> str:
        skipped.append(row.text)
        return "skip"

    try:
        table = pa.csv.read_csv(
            pa.BufferReader(data),
            # one thread per block (blocks are parsed in parallel by the caller); Arrow's own
            # threads cost more than they give here, mostly in the skip-handler's GIL handoffs
            read_options=pa.csv.ReadOptions(column_names=names, block_size=1 << 20, use_threads=False),
            parse_options=pa.csv.ParseOptions(
                delimiter="\t", quote_char=False, escape_char=False, newlines_in_values=False,
                ignore_empty_lines=False, invalid_row_handler=on_invalid,
            ),
            convert_options=pa.csv.ConvertOptions(
                # the block is valid UTF-8: plain text columns can come out as strings unchecked
                column_types={n: pa.string() if n in _PLAIN_TEXT else pa.binary() for n in names},
                strings_can_be_null=False, quoted_strings_can_be_null=False, check_utf8=False,
            ),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None  # a skipped row the handler could not see (invalid UTF-8)
    # with no CR and no quoting, a row is exactly a line (empty ones included)
    nlines = table.num_rows + len(skipped)
    wrong: list[tuple[int, bytes]] = []
    if skipped:
        # find each skipped line; it is a whole line, so search for it between newlines
        hay = b"\n" + data
        used: set[int] = set()
        cursor = 0
        for text in skipped:
            needle = b"\n" + text.encode("utf-8") + b"\n"
            pos = hay.find(needle, cursor)
            while pos in used:
                pos = hay.find(needle, pos + 1)
            if pos < 0:
                pos = hay.find(needle)
                while pos in used and pos >= 0:
                    pos = hay.find(needle, pos + 1)
                if pos < 0:
                    return None
            used.add(pos)
            cursor = pos + 1
        line_idx, last, count = [], 0, 0
        for pos in sorted(used):  # pos is where the line starts in `data`
            count += data.count(b"\n", last, pos)
            last = pos
            line_idx.append((count, data[pos : data.find(b"\n", pos)]))
        wrong = line_idx
    raw = {name: table.column(name).combine_chunks() for name in names}
    if table.num_rows and pc.min(pc.binary_length(raw["photo_id"])).as_py() == 0:
        # an empty line comes out as a row of empty fields: let the exact path tell them apart
        empty = pc.equal(pc.binary_length(raw[names[0]]), 0)
        for name in names[1:]:
            empty = pc.and_(empty, pc.equal(pc.binary_length(raw[name]), 0))
        if pc.any(empty).as_py():
            return None
    return raw, wrong, nlines
def _mask(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=bool)


def _has_nul(col: pa.Array) -> np.ndarray:
    """Rows of a text or list<text> column that hold a NUL byte (a numpy pass over its bytes)."""
    if pa.types.is_list(col.type):
        hit = np.zeros(len(col), dtype=bool)
        in_value = _has_nul(pc.list_flatten(col))
        hit[pc.list_parent_indices(col).to_numpy()[in_value]] = True
        return hit
    offsets, data = binary_buffers(col)
    bad = np.zeros(len(col), dtype=bool)
    pos = np.flatnonzero(data == 0)
    if pos.size:
        bad[np.searchsorted(offsets, pos, side="right") - 1] = True
    return bad


def _not_hex(col: pa.Array, allow_empty: bool) -> np.ndarray:
    """Rows of a text column that are not 1 to flickr.SECRET_MAX hex digits (or empty, if allowed)."""
    offsets, data = binary_buffers(col)
    lengths = np.diff(offsets)
    bad = (lengths > flickr.SECRET_MAX) | ((lengths == 0) & (not allow_empty))
    pos = np.flatnonzero(HEX_DIGITS[data] < 0)
    if pos.size:
        bad[np.searchsorted(offsets, pos, side="right") - 1] = True
    return bad


# long: the hot path of ingest: every column of a block checked and typed in one vectorised pass, in REASONS order
def _convert(raw: dict[str, pa.Array], n: int, maybe_nul: bool = True) -> tuple[dict[str, pa.Array], np.ndarray]:
    """Typed, decoded columns of `n` rows, and per row the index of its reject reason (-1 = ok).

    `maybe_nul`: whether the block may hold a raw NUL byte; False skips that check in the raw
    fields (the decoded text fields are always checked: `%00` decodes to one).
    """
    reason = np.full(n, -1, dtype=np.int8)

    def flag(mask: np.ndarray, why: str) -> None:  # the reason earliest in REASONS wins
        code = REASONS.index(why)
        reason[mask & ((reason < 0) | (reason > code))] = code

    if maybe_nul:
        for col in raw.values():
            flag(_has_nul(col), NUL_BYTE)
    cols: dict[str, pa.Array] = {}
    cols["photo_id"], bad = parse_ints(raw["photo_id"], pa.int64(), nullable=False)
    flag(bad | _mask(pc.fill_null(pc.less_equal(cols["photo_id"], 0), False)), BAD_PHOTO_ID)

    lon, lon_present, lon_bad = parse_floats(raw["longitude"])
    lat, lat_present, lat_bad = parse_floats(raw["latitude"])
    lat_np = lat.to_numpy(zero_copy_only=False)
    lon_np = lon.to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        not_finite = (lat_present & ~np.isfinite(lat_np)) | (lon_present & ~np.isfinite(lon_np))
        flag(lon_bad | lat_bad | (lon_present != lat_present) | not_finite, BAD_COORDINATES)
        flag(lat_present & ~(np.abs(lat_np) <= 90.0), LATITUDE_OUT_OF_RANGE)
        flag(lon_present & ~(np.abs(lon_np) <= 180.0), LONGITUDE_OUT_OF_RANGE)
    cols["longitude"], cols["latitude"] = lon, lat
    # fields that go into image URLs (mining.photos.flickr); server_id and farm_id below
    flag(_not_hex(raw["secret"], allow_empty=False) | _not_hex(raw["secret_original"], allow_empty=True)
         | ~_mask(pc.is_in(raw["extension"], value_set=_EXTENSION_VALUES.cast(raw["extension"].type))),
         BAD_URL_FIELD)

    for name in SCHEMA.names:
        if name in cols:
            continue
        if name not in raw:  # photo_hash of the 23-field layout
            cols[name] = pa.nulls(n, SCHEMA.field(name).type)
            continue
        col = raw[name]
        typ = SCHEMA.field(name).type
        if name in TAG_LISTS:
            cols[name], bad = split_decode(col)
            flag(bad, BAD_ENCODING)
        elif pa.types.is_string(typ):
            bad = np.zeros(n, dtype=bool)
            if name in DECODED_TEXT:
                col, bad = form_decode(col)
            cols[name], bad_utf = to_utf8(col)
            flag(bad | bad_utf, BAD_ENCODING)
        else:
            cols[name], bad = parse_ints(col, typ, nullable=True)
            if name in ("server_id", "farm_id"):  # digits only (Arrow casts no "+"); a server is needed
                negative = pc.less(cols[name], 0)
                if name == "server_id":
                    negative = pc.or_kleene(negative, pc.is_null(cols[name]))
                flag(bad | _mask(pc.fill_null(negative, False)), BAD_URL_FIELD)
            else:
                flag(bad, BAD_NUMBER)
        if name in DECODED_TEXT or name in TAG_LISTS:
            flag(_has_nul(cols[name]), NUL_BYTE)  # a NUL byte, raw or decoded from %00
    lo, hi = flickr.ACCURACY_RANGE
    accuracy, marker = cols["accuracy"], cols["marker"]
    flag(_mask(pc.fill_null(pc.or_(pc.less(accuracy, lo), pc.greater(accuracy, hi)), False))
         | _mask(pc.fill_null(pc.invert(pc.is_in(marker, pa.array(flickr.MARKERS, pa.int8()))), False)),
         OUT_OF_DOMAIN)
    return cols, reason


def long_line_block(head: bytes) -> Block:
    """The block of one line longer than MAX_LINE: quarantined as line_too_long, `head` its raw line."""
    return Block(table=SCHEMA.empty_table(), rejects=[(1, LINE_TOO_LONG, head[:LONG_LINE_HEAD])], lines=1)


def parse_block(data: bytes, nfields: int, first_line: int = 1) -> Block:
    """Parse one block of whole lines (each ending with a newline) of an `nfields` file.

    `first_line` is the 1-based line number of the block's first line in its file.
    """
    # CRLF line ends (a lone CR stays part of its line); a one-byte search first: `in` with a
    # two-byte needle scans ~50x slower (14 ms per 16 MiB block, ~13 % of the parse)
    if b"\r" in data and b"\r\n" in data:
        data = data.replace(b"\r\n", b"\n")
    split = _fast_split(data, nfields)
    if split is None:
        split = _exact_split(data, nfields)
    raw, wrong, nlines = split
    n = len(raw["photo_id"])
    cols, reason = _convert(raw, n, maybe_nul=b"\x00" in data)
    table = pa.table([cols[name] for name in SCHEMA.names], schema=SCHEMA)
    rejects = [(i, WRONG_FIELD_COUNT, text) for i, text in wrong]
    bad_rows = np.flatnonzero(reason >= 0)
    if len(bad_rows):
        table = table.filter(pa.array(reason < 0))
        # line index of kept row k = k + number of wrong-count lines before it
        wrong_idx = np.array([i for i, _ in wrong], dtype=np.int64)
        before = wrong_idx - np.arange(len(wrong_idx))  # kept rows before each wrong line
        line_idx = bad_rows + np.searchsorted(before, bad_rows, side="right")
        take = pa.array(bad_rows)
        texts = pc.binary_join_element_wise(
            *[raw[name].take(take).cast(pa.binary()) for name in LAYOUTS[nfields]],
            pa.scalar(b"\t", pa.binary()),
        ).to_pylist()
        rejects.extend(
            (int(i), REASONS[reason[k]], t) for i, k, t in zip(line_idx, bad_rows, texts)
        )
        rejects.sort(key=lambda r: r[0])
    out = [(first_line + i, why, text) for i, why, text in rejects]
    return Block(table=table, rejects=out, lines=nlines)
