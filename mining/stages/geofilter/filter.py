"""The streaming filter: metadata Parquet → candidates.parquet + stats.json.

One photo, one candidate. A photo id may sit on several metadata rows (one in Paris, two in
Tokyo); it becomes at most one candidate, and if any of its rows is excluded, the photo is.
Two streaming passes; memory: one bit per metadata row (12.5 MB for YFCC100M), one batch and
one bucket at a time:

1. the columns the rules need, batch by batch: each row gets a code (the first reason that
   excludes it, in a fixed order, or "kept") and a keep bit (one bit per row, in memory);
   (photo id, code, row position) triples are spilled to disk in hash buckets. Each bucket
   is then sorted on its own: a photo's fate is the smallest code among its rows, the funnel
   counts photos, and the keep bits of the rows that must go (every row of a photo excluded
   by another of its rows; every row but the first of a photo on several kept rows) are
   cleared.
2. all the columns, batch by batch: the rows whose keep bit is set are written.

The random sample is a "bottom-n" sample over photos: every photo gets a pseudo-random key
from hash(seed, photo_id) and the n smallest keys win. That is a uniform sample without
replacement, independent of batch size, file split and order. Pass 1 settles which photos
survive the rules, so their keys go through a running n-smallest there (memory ~2n keys) and
pass 2 writes only the rows below the final threshold.
"""

from __future__ import annotations

import logging
import os
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mining.files.atomic import atomic_path, write_json
from mining.errors import UserError
from mining.files.names import CANDIDATES, STATS
from mining.settings.exclusion import Recipe
from mining.console.progress import bar as progress_bar
from mining.compute.threads import read_ahead

log = logging.getLogger(__name__)

BATCH_ROWS = 262_144
BUCKET_ROWS = 1 << 22  # (photo id, code) pairs sorted at once: ~40 MB each, on disk until then
_UINT64_MAX = np.iinfo(np.uint64).max
_DUPLICATE_EXAMPLES = 10


def metadata_files(path: str | os.PathLike[str]) -> list[Path]:
    """The Parquet parts of a metadata dataset (a directory from `mining ingest`, or one file)."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise UserError(f"metadata not found: {p}")
    files = sorted(f for f in p.rglob("*.parquet") if not f.name.startswith((".", "_")))
    if not files:
        raise UserError(f"no Parquet files in {p} (expected the output of `mining ingest`)")
    return files


def sample_keys(photo_id: np.ndarray, seed: int) -> np.ndarray:
    """SplitMix64 of (photo_id, seed): well-mixed uint64 keys, the same on every machine."""
    z = photo_id.astype(np.uint64) ^ np.uint64((seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & _UINT64_MAX)
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class BottomN:
    """Running n smallest keys; `threshold` never increases, so it is safe to prune with."""

    def __init__(self, n: int):
        self.n = n
        self.kept = np.empty(0, dtype=np.uint64)
        self.pending: list[np.ndarray] = []
        self.pending_len = 0
        self.threshold = np.uint64(_UINT64_MAX)

    def add(self, keys: np.ndarray) -> None:
        self.pending.append(keys)
        self.pending_len += keys.size
        if self.pending_len >= max(self.n, 1 << 16):
            self._compact()

    def _compact(self) -> None:
        allk = np.concatenate([self.kept, *self.pending])
        self.pending, self.pending_len = [], 0
        if allk.size > self.n:
            allk = np.partition(allk, self.n - 1)[: self.n]
        self.kept = allk
        if allk.size >= self.n:
            self.threshold = allk.max()

    def final(self) -> tuple[np.uint64, int]:
        """(threshold, how many keys equal to it are still taken, in stream order)."""
        self._compact()
        t = self.threshold
        return t, self.n - int(np.count_nonzero(self.kept < t))


Mask = Callable[[np.ndarray, np.ndarray], np.ndarray]


def build_rules(recipe: Recipe) -> list[tuple[str, Mask]]:
    """(reason, mask function) for every country and area, in manifest order."""
    from mining.stages.geofilter.areas import area_mask
    from mining.stages.geofilter.countries import country_region

    rules: list[tuple[str, Mask]] = []
    for c in recipe.countries:
        rules.append((f"country:{c.code}", country_region(c, recipe.shoreline_buffer_km).contains))
    for a in recipe.areas:
        rules.append((f"area:{a.name}", area_mask(a)))
    return rules


def _required_columns(recipe: Recipe) -> set[str]:
    need = {"photo_id"}
    if recipe.require_geotag or recipe.countries or recipe.areas:
        need |= {"latitude", "longitude"}
    if recipe.photos_only:
        need.add("marker")
    if recipe.licenses is not None:
        need |= {"license_name", "license_url"}
    if recipe.min_accuracy is not None:
        need.add("accuracy")
    return need


def _np(col: pa.ChunkedArray | pa.Array, dtype) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=dtype)


class _Filter:
    """The recipe's rules as row codes: the index of the first reason that excludes a row
    (in `reasons` order), or `kept` = len(reasons)."""

    def __init__(self, recipe: Recipe, rules: list[tuple[str, Mask]]):
        self.recipe, self.rules = recipe, rules
        self.licenses = pa.array(list(recipe.licenses)) if recipe.licenses is not None else None
        self.reasons = [reason for reason, on in (
            ("no_geotag", recipe.require_geotag), ("video", recipe.photos_only),
            ("license", recipe.licenses is not None), ("accuracy", recipe.min_accuracy is not None)) if on]
        self.reasons += [reason for reason, _ in rules]
        self.kept = len(self.reasons)
        if self.kept > 254:
            raise UserError(f"too many geofilter rules ({len(rules)}); at most 250")

    def codes(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        """Per row, the code of the first reason that excludes it (`kept` if none)."""
        r = self.recipe
        n = batch.num_rows
        code = np.full(n, self.kept, dtype=np.uint8)
        alive = np.ones(n, dtype=bool)

        def drop(reason: str, bad: np.ndarray) -> None:
            hit = alive & bad
            code[hit] = self.reasons.index(reason)
            alive[hit] = False

        names = batch.schema.names
        lat = lon = None
        if "latitude" in names and "longitude" in names:
            lat = _np(batch.column("latitude"), np.float64)
            lon = _np(batch.column("longitude"), np.float64)
        if r.require_geotag:
            drop("no_geotag", ~(np.isfinite(lat) & np.isfinite(lon)))
        if r.photos_only:
            drop("video", _np(pc.fill_null(pc.equal(batch.column("marker"), 1), False), bool))
        if self.licenses is not None:
            ok = pc.or_(pc.is_in(batch.column("license_name"), value_set=self.licenses),
                        pc.is_in(batch.column("license_url"), value_set=self.licenses))
            drop("license", ~_np(pc.fill_null(ok, False), bool))
        if r.min_accuracy is not None:
            ok = pc.fill_null(pc.greater_equal(batch.column("accuracy"), r.min_accuracy), False)
            drop("accuracy", ~_np(ok, bool))
        for reason, mask in self.rules:
            sel = np.flatnonzero(alive & np.isfinite(lat) & np.isfinite(lon))
            if sel.size == 0:
                continue
            bad = np.zeros(n, dtype=bool)
            bad[sel] = mask(lon[sel], lat[sel])
            drop(reason, bad)
        return code


@dataclass
class Photos:
    """What pass 1 learnt about photos: the funnel in photos and the photo ids on several rows."""

    rows_in: int = 0
    photos_in: int = 0
    per_code: np.ndarray = field(default_factory=lambda: np.zeros(256, dtype=np.int64))
    duplicate_photos: int = 0
    duplicate_rows: int = 0
    examples: list[int] = field(default_factory=list)


class _Bits:
    """One keep bit per metadata row, packed: written in row order by pass 1, cleared at
    random positions when a photo's other rows decide, read back in row order by pass 2."""

    def __init__(self, total_rows: int):
        self.bitmap = np.zeros((total_rows + 7) // 8, dtype=np.uint8)
        self._carry = np.empty(0, dtype=bool)
        self._written = 0  # bytes
        self._read = 0  # bits

    def add(self, keep: np.ndarray) -> None:
        data = np.concatenate((self._carry, keep)) if self._carry.size else keep
        whole = data.size - data.size % 8
        packed = np.packbits(data[:whole])
        self.bitmap[self._written:self._written + packed.size] = packed
        self._written += packed.size
        self._carry = data[whole:].copy()

    def close(self) -> None:
        if self._carry.size:
            self.bitmap[self._written] = np.packbits(self._carry)[0]
            self._written += 1
            self._carry = np.empty(0, dtype=bool)

    def clear(self, positions: np.ndarray) -> None:
        positions = positions.astype(np.int64)
        masks = np.invert(np.right_shift(np.uint8(0x80), (positions & 7).astype(np.uint8)))
        np.bitwise_and.at(self.bitmap, positions >> 3, masks)

    def take(self, n: int) -> np.ndarray:
        lo, skip = self._read >> 3, self._read & 7
        bits = np.unpackbits(self.bitmap[lo:(self._read + n + 7) >> 3])[skip:skip + n].astype(bool)
        self._read += n
        return bits


class _Ledger:
    """(photo id, row code, row position) of every metadata row, spilled to `folder` in hash
    buckets of about BUCKET_ROWS rows, so that each bucket can be sorted on its own in bounded
    memory. Sorting a bucket by photo id puts a photo's rows side by side: its fate is the
    smallest code among them; the keep bits of its rows that must go are cleared."""

    def __init__(self, folder: Path, total_rows: int):
        self.k = max(1, -(-total_rows // BUCKET_ROWS))
        self.dtype = np.dtype([("id", "<i8"), ("code", "u1"), ("pos", "<u4" if total_rows < 2**32 else "<u8")])
        self.files = [open(folder / f"bucket-{i:05d}.bin", "wb") for i in range(self.k)]
        self.rows = 0

    def add(self, ids: np.ndarray, codes: np.ndarray) -> None:
        rec = np.empty(ids.size, dtype=self.dtype)
        rec["id"], rec["code"] = ids, codes
        rec["pos"] = np.arange(self.rows, self.rows + ids.size)
        self.rows += ids.size
        if self.k == 1:
            self.files[0].write(rec.tobytes())
            return
        bucket = (sample_keys(ids, 0x1D5) % np.uint64(self.k)).astype(np.int64)
        order = np.argsort(bucket, kind="stable")
        bounds = np.searchsorted(bucket[order], np.arange(self.k + 1))
        for b in np.flatnonzero(np.diff(bounds)):
            self.files[b].write(rec[order[bounds[b]:bounds[b + 1]]].tobytes())

    def settle(self, kept: int, bits: _Bits, sampler: BottomN | None = None, seed: int = 0) -> Photos:
        """Sort each bucket: count photos per fate; clear the keep bit of every row of a photo
        excluded by another row, and of every row but the first of a photo on several kept rows;
        feed the sample keys of the kept photos to `sampler`."""
        for f in self.files:
            f.close()
        out = Photos()
        examples: list[np.ndarray] = []
        for f in self.files:
            rec = np.fromfile(f.name, dtype=self.dtype)
            Path(f.name).unlink()
            out.rows_in += rec.size
            if rec.size == 0:
                continue
            rec = rec[np.lexsort((rec["pos"], rec["code"], rec["id"]))]
            ids, codes = rec["id"], rec["code"]
            starts = np.concatenate(([True], ids[1:] != ids[:-1]))
            first = np.flatnonzero(starts)
            count = np.diff(np.append(first, ids.size))
            fate = codes[first]  # the smallest code of each photo: kept only if all its rows are
            out.photos_in += first.size
            out.per_code += np.bincount(fate, minlength=256)
            if sampler is not None:
                sampler.add(sample_keys(ids[first][fate == kept], seed))
            dup = count > 1
            if not dup.any():
                continue
            out.duplicate_photos += int(np.count_nonzero(dup))
            out.duplicate_rows += int(count[dup].sum())
            examples.append(ids[first[dup]][:_DUPLICATE_EXAMPLES])
            # rows kept by the rules that must go: all of an excluded photo's, and every one
            # but the first (smallest position) of a kept photo's
            row_fate = np.repeat(fate, count)
            bits.clear(rec["pos"][(codes == kept) & ((row_fate != kept) | ~starts)])
        if examples:
            out.examples = [int(i) for i in np.sort(np.concatenate(examples))[:_DUPLICATE_EXAMPLES]]
        return out


def _chunks(files: list[Path], progress: bool, columns: list[str] | None = None,
            desc: str = "geofilter") -> Iterator[pa.Table | pa.RecordBatch]:
    """The metadata in order, ~BATCH_ROWS rows at a time (only `columns`, if given). Whole
    row groups are read together (pyarrow decodes their columns in parallel); a row group
    much larger than BATCH_ROWS is streamed in batches so memory stays bounded."""
    total = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    with progress_bar(total=total, unit="row", unit_scale=True, desc=desc, disable=not progress) as bar:
        for f in files:
            pf = pq.ParquetFile(f)
            group: list[int] = []
            rows = 0
            for i in range(pf.metadata.num_row_groups + 1):
                n = pf.metadata.row_group(i).num_rows if i < pf.metadata.num_row_groups else 0
                if group and (i == pf.metadata.num_row_groups or rows + n > BATCH_ROWS):
                    yield pf.read_row_groups(group, columns=columns)
                    bar.update(rows)
                    group, rows = [], 0
                if i == pf.metadata.num_row_groups:
                    break
                if n > 2 * BATCH_ROWS:
                    for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=[i], columns=columns):
                        yield batch
                        bar.update(batch.num_rows)
                else:
                    group.append(i)
                    rows += n


def _conform(batch: pa.Table | pa.RecordBatch, schema: pa.Schema) -> pa.Table | pa.RecordBatch:
    """A batch in the first part's schema (parts written by other tools may differ slightly)."""
    if batch.schema == schema:
        return batch
    try:
        return batch.select(schema.names).cast(schema)
    except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise UserError(f"metadata parts have different schemas: {exc}") from None


# Low-cardinality columns: dictionary-encode these only (trying it on titles, URLs and
# secrets costs write time and then falls back to plain anyway).
_DICT_COLUMNS = ("license_name", "license_url", "extension", "capture_device", "marker", "accuracy",
                 "farm_id", "place_country")


def _writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    """zstd: about half snappy's size (R1M-scale candidate files are tens of GB) for ~10 %
    more write CPU."""
    return pq.ParquetWriter(path, schema, compression="zstd",
                            use_dictionary=[c for c in _DICT_COLUMNS if c in schema.names])


def writer_schema(files: list[Path], recipe: Recipe) -> pa.Schema:
    schema = pq.read_schema(files[0])
    missing = sorted(_required_columns(recipe) - set(schema.names))
    if missing:
        raise UserError(f"metadata {files[0]} lacks column(s) {', '.join(missing)} that the manifest needs")
    return schema.remove_metadata()


def _first_pass(files: list[Path], schema: pa.Schema, filt: _Filter, scratch: Path,
                progress: bool, sampler: BottomN | None) -> tuple[Photos, _Bits]:
    """Pass 1: every row's code, spilled per photo id; the photo-level funnel; keep bits; the
    kept photos' sample keys."""
    columns = sorted(_required_columns(filt.recipe))
    projected = pa.schema([schema.field(c) for c in columns])
    total = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    ledger = _Ledger(scratch, total)
    bits = _Bits(total)
    for batch in read_ahead(_chunks(files, progress, columns=columns, desc="geofilter (rules)")):
        batch = _conform(batch, projected)
        if batch.column("photo_id").null_count:
            raise UserError("metadata has rows without a photo_id")
        codes = filt.codes(batch)
        ledger.add(_np(batch.column("photo_id"), np.int64), codes)
        bits.add(codes == filt.kept)
    bits.close()
    return ledger.settle(filt.kept, bits, sampler, filt.recipe.sample_seed), bits


def write_candidates(files: list[Path], schema: pa.Schema, recipe: Recipe, out_dir: Path, progress: bool) -> dict:
    # stats.json is written last: present means candidates.parquet beside it is from the same run.
    (out_dir / STATS).unlink(missing_ok=True)
    filt = _Filter(recipe, build_rules(recipe))
    sampler = BottomN(recipe.sample_n) if recipe.sample_n is not None else None
    with tempfile.TemporaryDirectory(prefix=".geofilter-ids.", dir=out_dir) as scratch:
        photos, bits = _first_pass(files, schema, filt, Path(scratch), progress, sampler)
    if photos.duplicate_photos:
        log.warning("%d photo ids sit on more than one metadata row (%d rows, e.g. %s): each is one "
                    "candidate at most, excluded if any of its rows is", photos.duplicate_photos,
                    photos.duplicate_rows, ", ".join(map(str, photos.examples[:3])))
    # the sample's final threshold, and how many keys equal to it are still taken (in stream
    # order; keys of distinct ids are distinct: SplitMix64 is a bijection, so this is defensive)
    thr, ties_left = sampler.final() if sampler is not None else (None, 0)
    survivors = rows_out = 0

    with atomic_path(out_dir / CANDIDATES) as final_tmp, _writer(final_tmp, schema) as writer, \
            ThreadPoolExecutor(1, thread_name_prefix="geofilter-write") as write_pool:
        # three stages on their own threads: read batch k+1, filter batch k, write batch k-1
        # (one write in flight, so the file's rows stay in metadata order)
        writing: Future | None = None
        for batch in read_ahead(_chunks(files, progress, desc="geofilter (write)")):
            batch = _conform(batch, schema)
            keep = bits.take(batch.num_rows)
            if not keep.any():
                continue
            survivors += int(np.count_nonzero(keep))
            if sampler is not None:
                idx = np.flatnonzero(keep)
                keys = sample_keys(_np(batch.column("photo_id"), np.int64)[idx], recipe.sample_seed)
                take = keys < thr
                eq = np.flatnonzero(keys == thr)
                if eq.size and ties_left > 0:
                    take[eq[:ties_left]] = True
                    ties_left -= min(eq.size, ties_left)
                keep = np.zeros_like(keep)
                keep[idx[take]] = True
            if keep.any():
                kept = batch.filter(pa.array(keep))
                rows_out += int(np.count_nonzero(keep))
                if writing is not None:
                    writing.result()
                writing = write_pool.submit(writer.write, kept)
        if writing is not None:
            writing.result()
    assert survivors == photos.per_code[filt.kept], "pass 2 disagrees with pass 1"
    stats = _funnel_stats(photos, filt, sampled_out=survivors - rows_out if sampler is not None else None,
                          rows_out=rows_out)
    write_json(out_dir / STATS, stats)
    return stats


def _funnel_stats(photos: Photos, filt: _Filter, sampled_out: int | None, rows_out: int) -> dict:
    """stats.json: rows and photos in, duplicate ids, photos excluded per reason (and by the
    sample, when there is one: `sampled_out`), photos out; checked to add up."""
    excluded = {reason: int(photos.per_code[i]) for i, reason in enumerate(filt.reasons)}
    if sampled_out is not None:
        excluded["sampled_out"] = sampled_out
    assert photos.photos_in == rows_out + sum(excluded.values()), "funnel does not add up"
    return {
        "rows_in": photos.rows_in,
        "photos_in": photos.photos_in,
        "duplicate_ids": {"photos": photos.duplicate_photos, "rows": photos.duplicate_rows,
                          "examples": photos.examples},
        "excluded": excluded,
        "photos_out": rows_out,
        "rows_out": rows_out,
    }
