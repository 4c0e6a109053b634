"""`images/index.parquet`: one row per candidate photo of a download, what became of it.

Written by `mining download` when it ends (from the shards' statuses), read by every stage
after it: an image is found through this table, never by recomputing its key, so the key rule
(`mining.settings.layout.image_key`) lives in one place. Columns (`SCHEMA`):

- `photo_id`; `photo_hash`: the image key (YFCC's photo hash, the mirror's key; the photo id's
  MD5 for a row without a download URL); `path`: where the image is, relative to the download
  folder (`jpg/<3 hex>/<key>.jpg`, revisitop's R1M layout), set for `ok` rows only; `tar`: the
  shard tar holding `<key>.jpg` in tar mode (null otherwise);
- `status`: `ok` or the final failure (the last source's); `source`: the name of the source
  that served it (null when none did); `low_res`: served by a source marked `low_res`
  (the mirror's ~500 px copies); `urls`: every URL tried, in order;
- `width`, `height`, `sha256` of the stored image.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from mining.files import atomic
from mining.errors import UserError
from mining.files.names import IMAGE_INDEX
from mining.files.tables import read_file

NAME = IMAGE_INDEX

SCHEMA = pa.schema([
    ("photo_id", pa.int64()),
    ("photo_hash", pa.string()),
    ("status", pa.string()),
    ("source", pa.string()),
    ("low_res", pa.bool_()),
    ("path", pa.string()),
    ("tar", pa.string()),
    ("urls", pa.list_(pa.string())),
    ("width", pa.int32()),
    ("height", pa.int32()),
    ("sha256", pa.string()),
])


def write(images_root: str | os.PathLike[str], rows: Iterable[dict]) -> Path:
    """Write DIR/index.parquet atomically, rows sorted by photo id (missing columns are null)."""
    rows = sorted(rows, key=lambda r: int(r["photo_id"]))
    table = pa.Table.from_pylist([{n: r.get(n) for n in SCHEMA.names} for r in rows], schema=SCHEMA)
    path = Path(images_root) / NAME
    atomic.write_parquet(path, table)
    return path


def read(images_root: str | os.PathLike[str], columns: list[str] | None = None) -> pa.Table:
    """DIR/index.parquet; a missing or unreadable one is a one-line UserError."""
    path = Path(images_root) / NAME
    if not path.is_file():
        raise UserError(f"{images_root}: no {NAME} (expected a `mining download` output folder; "
                        "rerun `mining download` with the same options to write it)")
    try:
        return read_file(path, columns)
    except (OSError, pa.ArrowException) as exc:
        raise UserError(f"{path} cannot be read as Parquet: {exc}") from None


def image_paths(images_root: str | os.PathLike[str], photo_ids: Iterable[int]) -> list[Path]:
    """The image files of these photo ids (in their order); a photo the index does not hold as
    `ok` is a one-line UserError (descriptors or scores from another download)."""
    where = stored(images_root)
    missing = [int(p) for p in photo_ids if int(p) not in where]
    if missing:
        raise UserError(f"{len(missing)} photo(s) are not downloaded images of {images_root} (e.g. {missing[0]}): "
                        "were these outputs made from another download?")
    return [Path(images_root) / where[int(p)] for p in photo_ids]


def stored(images_root: str | os.PathLike[str], full_res_only: bool = False) -> dict[int, str]:
    """{photo id: path relative to the download folder} of the `ok` images, ascending by id.

    `full_res_only`: leave out the images that only a `low_res` source had."""
    t = read(images_root, ["photo_id", "status", "low_res", "path"])
    out: dict[int, str] = {}
    for pid, status, low, path in zip(*(t.column(c).to_pylist() for c in ("photo_id", "status", "low_res", "path"))):
        if status == "ok" and path and not (full_res_only and low):
            out[int(pid)] = path
    return out
