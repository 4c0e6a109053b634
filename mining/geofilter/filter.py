"""The streaming filter: metadata Parquet → candidates.parquet + stats.json.

One pass over the metadata, batch by batch (bounded memory). Each row is dropped for the
first reason that applies, in a fixed order, so `rows_in == rows_out + sum(excluded)`.
The random sample is a "bottom-n" sample: every row gets a pseudo-random key from
hash(seed, photo_id) and the n smallest keys win. That is a uniform sample without
replacement, independent of batch size, file split and order, and it streams: rows whose
key is already above the running n-th smallest are never written; a second pass over the
(smaller) survivors file applies the final threshold.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mining.atomic import atomic_path, write_json
from mining.errors import UserError
from mining.geofilter.manifest import Recipe

log = logging.getLogger(__name__)

BATCH_ROWS = 262_144
_UINT64_MAX = np.iinfo(np.uint64).max


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


@dataclass
class Funnel:
    rows_in: int = 0
    excluded: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str, count: int) -> None:
        self.excluded[reason] = self.excluded.get(reason, 0) + int(count)

    def stats(self, rows_out: int) -> dict:
        assert self.rows_in == rows_out + sum(self.excluded.values()), "funnel does not add up"
        return {"rows_in": self.rows_in, "rows_out": rows_out, "excluded": dict(self.excluded)}


Mask = Callable[[np.ndarray, np.ndarray], np.ndarray]


def build_rules(recipe: Recipe) -> list[tuple[str, Mask]]:
    """(reason, mask function) for every country and area, in manifest order."""
    from mining.geofilter.areas import area_mask
    from mining.geofilter.countries import country_region

    rules: list[tuple[str, Mask]] = []
    for c in recipe.countries:
        rules.append((f"country:{c.code}", country_region(c, recipe.shoreline_buffer_km).contains))
    for a in recipe.areas:
        rules.append((f"area:{a.name}", area_mask(a)))
    return rules


def _required_columns(recipe: Recipe) -> set[str]:
    need = {"latitude", "longitude"} if (recipe.require_geotag or recipe.countries or recipe.areas) else set()
    if recipe.photos_only:
        need.add("marker")
    if recipe.licenses is not None:
        need |= {"license_name", "license_url"}
    if recipe.min_accuracy is not None:
        need.add("accuracy")
    if recipe.sample_n is not None:
        need.add("photo_id")
    return need


def _np(col: pa.ChunkedArray | pa.Array, dtype) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=dtype)


class _Filter:
    def __init__(self, recipe: Recipe, rules: list[tuple[str, Mask]], funnel: Funnel):
        self.recipe, self.rules, self.funnel = recipe, rules, funnel
        self.licenses = pa.array(list(recipe.licenses)) if recipe.licenses is not None else None

    def keep_mask(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        """Mask of the rows that pass every rule; counts each dropped row once."""
        r, f = self.recipe, self.funnel
        n = batch.num_rows
        f.rows_in += n
        alive = np.ones(n, dtype=bool)

        def drop(reason: str, bad: np.ndarray) -> None:
            hit = alive & bad
            f.drop(reason, np.count_nonzero(hit))
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
        if self.rules:
            for reason, mask in self.rules:
                sel = np.flatnonzero(alive & np.isfinite(lat) & np.isfinite(lon))
                if sel.size == 0:
                    f.drop(reason, 0)
                    continue
                bad = np.zeros(n, dtype=bool)
                bad[sel] = mask(lon[sel], lat[sel])
                drop(reason, bad)
        return alive


def _chunks(files: list[Path], progress: bool) -> Iterator[pa.Table | pa.RecordBatch]:
    """The metadata in order, ~BATCH_ROWS rows at a time. Whole row groups are read
    together (pyarrow decodes their columns in parallel); a row group much larger than
    BATCH_ROWS is streamed in batches so memory stays bounded."""
    from mining.progress import bar as progress_bar

    total = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    with progress_bar(total=total, unit="row", unit_scale=True, desc="geofilter", disable=not progress) as bar:
        for f in files:
            pf = pq.ParquetFile(f)
            group: list[int] = []
            rows = 0
            for i in range(pf.metadata.num_row_groups + 1):
                n = pf.metadata.row_group(i).num_rows if i < pf.metadata.num_row_groups else 0
                if group and (i == pf.metadata.num_row_groups or rows + n > BATCH_ROWS):
                    yield pf.read_row_groups(group)
                    bar.update(rows)
                    group, rows = [], 0
                if i == pf.metadata.num_row_groups:
                    break
                if n > 2 * BATCH_ROWS:
                    for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=[i]):
                        yield batch
                        bar.update(batch.num_rows)
                else:
                    group.append(i)
                    rows += n


# Low-cardinality columns: dictionary-encode these only (trying it on titles, URLs and
# secrets costs write time and then falls back to plain anyway).
_DICT_COLUMNS = ("license_name", "license_url", "extension", "capture_device", "marker", "accuracy",
                 "farm_id", "place_country")


def _writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    """zstd: about half snappy's size (R1M-scale candidate files are tens of GB) for ~10 %
    more write CPU."""
    return pq.ParquetWriter(path, schema, compression="zstd",
                            use_dictionary=[c for c in _DICT_COLUMNS if c in schema.names])


def _writer_schema(files: list[Path], recipe: Recipe) -> pa.Schema:
    schema = pq.read_schema(files[0])
    missing = sorted(_required_columns(recipe) - set(schema.names))
    if missing:
        raise UserError(f"metadata {files[0]} lacks column(s) {', '.join(missing)} that the manifest needs")
    return schema.remove_metadata()


def geofilter(metadata: str | os.PathLike[str], recipe: Recipe, out: str | os.PathLike[str],
              progress: bool = True) -> dict:
    """Filter a metadata dataset with a recipe; write OUT/candidates.parquet and OUT/stats.json.

    Returns the stats dict: rows_in, rows_out, excluded {reason: count}, all reasons present
    (zero when nothing was dropped for them) so funnels of different runs line up."""
    files = metadata_files(metadata)
    schema = _writer_schema(files, recipe)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    # stats.json is written last: present means candidates.parquet beside it is from the same run.
    (out_dir / "stats.json").unlink(missing_ok=True)

    funnel = Funnel()
    for reason, on in (("no_geotag", recipe.require_geotag), ("video", recipe.photos_only),
                       ("license", recipe.licenses is not None), ("accuracy", recipe.min_accuracy is not None)):
        if on:
            funnel.drop(reason, 0)
    rules = build_rules(recipe)
    filt = _Filter(recipe, rules, funnel)
    sampler = BottomN(recipe.sample_n) if recipe.sample_n is not None else None
    survivors = 0

    with atomic_path(out_dir / "candidates.parquet") as final_tmp:
        fd, stage1_name = tempfile.mkstemp(prefix=".candidates.", suffix=".pass1.parquet", dir=out_dir)
        os.close(fd)
        stage1 = Path(stage1_name)
        try:
            target = final_tmp if sampler is None else stage1
            with _writer(target, schema) as writer:
                for batch in _chunks(files, progress):
                    if batch.schema != schema:
                        try:
                            batch = batch.select(schema.names).cast(schema)
                        except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                            raise UserError(f"metadata parts have different schemas: {exc}") from None
                    keep = filt.keep_mask(batch)
                    survivors += int(np.count_nonzero(keep))
                    if sampler is not None:
                        keys = sample_keys(_np(batch.column("photo_id"), np.int64)[keep], recipe.sample_seed)
                        sampler.add(keys)
                        # prune rows that can no longer make the sample (threshold only decreases)
                        idx = np.flatnonzero(keep)
                        keep = np.zeros_like(keep)
                        keep[idx[keys <= sampler.threshold]] = True
                    if keep.any():
                        writer.write(batch.filter(pa.array(keep)))
            rows_out = survivors
            if sampler is not None:
                if survivors <= sampler.n:
                    os.replace(stage1, final_tmp)
                else:
                    rows_out = _apply_threshold(stage1, final_tmp, schema, sampler, recipe.sample_seed)
                funnel.drop("sampled_out", survivors - rows_out)
        finally:
            if stage1.exists():
                stage1.unlink()

    stats = funnel.stats(rows_out)
    write_json(out_dir / "stats.json", stats)
    return stats


def _apply_threshold(src: Path, dst: Path, schema: pa.Schema, sampler: BottomN, seed: int) -> int:
    """Second pass over the pruned survivors: keep keys below the final threshold, plus as
    many keys equal to it (duplicate photo ids) as the sample still needs, in order."""
    thr, ties_left = sampler.final()
    written = 0
    with _writer(dst, schema) as writer:
        for batch in pq.ParquetFile(src).iter_batches(batch_size=BATCH_ROWS):
            keys = sample_keys(_np(batch.column("photo_id"), np.int64), seed)
            keep = keys < thr
            eq = np.flatnonzero(keys == thr)
            if eq.size and ties_left > 0:
                take = eq[:ties_left]
                keep[take] = True
                ties_left -= take.size
            if keep.any():
                writer.write(batch.filter(pa.array(keep)))
                written += int(np.count_nonzero(keep))
    return written
