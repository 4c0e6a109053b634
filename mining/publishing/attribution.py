"""Credit for the published photos: their metadata (URL parts, licence, owner, title) read
from the candidates, and the attribution files (ATTRIBUTION.csv, ATTRIBUTION.md) that CC
licences require. `mining select` writes them for its selection and `mining release` for the
released images; every value from metadata goes through `mining.publishing.text`'s escaping.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mining.errors import UserError
from mining.publishing.licences import licence_code
from mining.publishing.text import csv_text, md_link, md_text, plain

CANDIDATE_COLUMNS = ("photo_id", "server_id", "secret", "secret_original", "extension", "license_name",
                     "license_url", "user_nsid", "user_nickname", "title", "page_url", "download_url")


def load_candidate_meta(path: Path, photo_ids: np.ndarray) -> Any:
    """The selected photos' metadata (URL parts, licence, owner), indexed by photo id."""
    import pyarrow.dataset as ds

    if not path.exists():
        raise UserError(f"candidates not found: {path}")
    try:
        dataset = ds.dataset(path, format="parquet")
    except (OSError, pa.ArrowException) as exc:
        raise UserError(f"cannot read candidates {path}: {str(exc).splitlines()[0]}") from None
    need = ("photo_id", "server_id", "secret", "license_name", "license_url", "user_nsid")
    lacking = [c for c in need if c not in dataset.schema.names]
    if lacking:
        raise UserError(f"candidates {path} lack column(s): {', '.join(lacking)}")
    cols = [c for c in CANDIDATE_COLUMNS if c in dataset.schema.names]
    table = dataset.to_table(columns=cols, filter=pc.field("photo_id").isin(pa.array(photo_ids, pa.int64())))
    df = table.to_pandas().drop_duplicates("photo_id").set_index("photo_id")
    for c in CANDIDATE_COLUMNS[1:]:
        if c not in df.columns:
            df[c] = None
    absent = np.setdiff1d(photo_ids, df.index.to_numpy())
    if absent.size:
        raise UserError(f"{absent.size} selected photo id(s) are not in candidates {path} (e.g. {absent[0]}); "
                        "wrong candidates file?")
    return df.loc[photo_ids]


def attribution_csv(frame: Any, titles: list[str], pages: list[str]) -> str:
    """One record per photo; every value made safe to open in a spreadsheet (mining.publishing.text)."""
    return csv_text(
        ["path", "photo_id", "title", "owner_nsid", "owner_name", "source", "license_name", "license_url"],
        ([row.path, row.photo_id, title, row.user_nsid, row.user_nickname, page, row.license_name, row.license_url]
         for row, title, page in zip(frame.itertuples(index=False), titles, pages)))


def attribution_md(frame: Any, titles: list[str], pages: list[str],
                   changes: str = "Images are unmodified except for resizing to 1024 px on the long side by Flickr.") -> str:
    """TASL attribution (title, author, source, licence) per image, as CC licences require
    (`changes`: the sentence saying how the images were modified, also a licence term)."""
    lines = [
        "# Attribution",
        "",
        f"This distractor set holds {len(frame)} photographs from Flickr (via YFCC100M), each under the "
        "Creative Commons licence named below. Credit: title, author (Flickr owner), source page, licence.",
        changes,
        "",
        "| # | image | title | author | source | licence |",
        "|---|---|---|---|---|---|",
    ]

    for row, title, page in zip(frame.itertuples(index=False), titles, pages):
        author = plain(row.user_nickname).strip() or row.user_nsid
        lines.append(f"| {row.rank} | `{row.path}` | {md_text(title)} | {md_text(author)} ({md_text(row.user_nsid)}) "
                     f"| {md_link(page, page)} | {_licence_cell(row.license_name, row.license_url)} |")
    return "\n".join(lines) + "\n"


def _licence_cell(name: Any, url: Any) -> str:
    """The licence linked to its URL when it is a known licence (`mining.publishing.licences`); else
    the name as found, marked unknown, with no link."""
    if licence_code(name, url) is not None:
        return md_link(name, url)
    return f"{md_text(name) or '–'} (unknown licence)"


def credit_fields(meta: Any, photo_ids: Any) -> tuple[list[str], list[str]]:
    """Each photo's title ("" when none) and source page (its page_url, else the Flickr page
    built from owner and id), from metadata rows in the same order as `photo_ids`."""
    pages = [pg if isinstance(pg, str) and pg else f"https://www.flickr.com/photos/{quote(plain(o), safe='@')}/{p}"
             for pg, o, p in zip(meta.page_url, meta.user_nsid, photo_ids)]
    titles = ["" if t is None or (isinstance(t, float) and np.isnan(t)) else str(t) for t in meta.title]
    return titles, pages
