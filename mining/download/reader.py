"""Candidates → shards of URL jobs, skipping work that is already done.

Shards are consecutive slices of the candidates in their file order, so the same input and
shard size always give the same shards; `DIR/download.json` pins both, and a rerun with a
different plan is refused rather than silently mixing two shardings.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from mining.download.writer import image_exists
from mining.errors import UserError
from mining.flickr import DEFAULT_HOST, photo_url  # noqa: F401 (re-exported: the download stage's host)

REQUIRED = ("photo_id", "server_id", "secret", "secret_original", "extension")
# Statuses worth asking again on a rerun: the photo may well be there next time.
TRANSIENT = frozenset({"timeout", "throttled_gave_up", "error"})
STATUSES = (
    "ok", "not_found", "gone", "forbidden", "unavailable_placeholder", "too_small",
    "corrupt", "not_jpeg", "timeout", "throttled_gave_up", "error", "no_original",
)


@dataclass
class Shard:
    """One unit of Dask work: thousands of URL jobs, with what earlier runs settled."""

    index: int
    photo_ids: list[int]
    urls: list[str | None]  # None: no URL can be built (`--size o` without an original secret)
    done: list[dict] = field(default_factory=list)  # final rows kept from an earlier run

    @property
    def name(self) -> str:
        return f"shard-{self.index:05d}"


def load_candidates(path: str | os.PathLike[str]) -> pa.Table:
    """Read the geofilter output (a Parquet file or folder); bad input is a one-line UserError."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"candidates not found: {p}")
    try:
        dataset = ds.dataset(p, format="parquet")
        missing = [c for c in REQUIRED if c not in dataset.schema.names]
        if missing:
            raise UserError(f"candidates {p} lack column(s): {', '.join(missing)}")
        table = dataset.to_table(columns=list(REQUIRED))
    except UserError:
        raise
    except (OSError, pa.ArrowException) as exc:
        raise UserError(f"cannot read candidates {p}: {str(exc).splitlines()[0]}") from None
    if table.column("photo_id").null_count or table.column("server_id").null_count:
        raise UserError(f"candidates {p} have rows without photo_id or server_id")
    return table


def build_urls(table: pa.Table, host: str, size: str) -> tuple[list[int], list[str | None]]:
    """Photo ids and their URLs, in file order, duplicates of a photo id dropped.

    With `--size o` a photo without an original secret (Flickr withholds it for many
    photos) has no URL: None, which the downloader records as `no_original` without a
    request; only a column empty for every photo is refused as a whole."""
    if size not in ("b", "o"):
        raise UserError(f"--size must be b or o, not {size!r}")
    if size == "o" and table.column("secret_original").null_count == table.num_rows and table.num_rows:
        raise UserError("--size o needs secret_original, which is empty in these candidates")
    cols = {c: table.column(c).to_pylist() for c in REQUIRED}
    ids: list[int] = []
    urls: list[str | None] = []
    seen: set[int] = set()
    for pid, srv, sec, seco, ext in zip(*(cols[c] for c in REQUIRED)):
        if pid in seen:
            continue
        seen.add(pid)
        ids.append(int(pid))
        urls.append(None if size == "o" and not seco else photo_url(host, size, int(srv), int(pid), sec, seco, ext))
    return ids, urls


def check_out_dir(out: str | os.PathLike[str]) -> Path:
    """Create the output folder and prove it is writable, before any request is made."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe.", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"output folder {out} is not writable: {exc.strerror or exc}") from None
    return out


def plan_fingerprint(ids: list[int], urls: list[str | None], shard_size: int) -> str:
    """Identity of a plan: same candidates, image paths and shard size → same shards.

    The host is left out on purpose: resuming from another mirror (or from the demo
    server on a new port) is the same download."""
    from urllib.parse import urlsplit

    h = hashlib.sha256(f"{shard_size}\n".encode())
    for pid, url in zip(ids, urls):
        h.update(f"{pid} {urlsplit(url).path if url else '-'}\n".encode())
    return h.hexdigest()


def status_path(out: Path, index: int) -> Path:
    return out / "status" / f"shard-{index:05d}.parquet"


def origin(url: str | None) -> str:
    """`scheme://host:port` of a URL, lower case (a string split: millions of URLs on a resume).
    "Same host?" in the download stage is always this: resume and the failure summary agree."""
    return "/".join((url or "").split("/", 3)[:3]).lower()


def plan_shards(out: Path, ids: list[int], urls: list[str | None], shard_size: int, tar: bool = False) -> tuple[list[Shard], int]:
    """Shards still to do (complete ones skipped) and the number of shards in the plan.

    A shard whose status file has only final statuses is complete. Otherwise its final rows
    are carried over and only its transient failures (and never-tried photos) are redone.
    A final failure is final for the host that gave it: recorded for another host (a wrong
    `--host` that answered 404 to everything, another mirror), the photo is asked again.
    """
    if shard_size < 1:
        raise UserError("--shard-size must be at least 1")
    todo: list[Shard] = []
    n_shards = (len(ids) + shard_size - 1) // shard_size
    for i in range(n_shards):
        sl = slice(i * shard_size, (i + 1) * shard_size)
        shard = Shard(i, ids[sl], urls[sl])
        sp = status_path(out, i)
        if sp.exists():
            prev = pq.read_table(sp).to_pylist()
            asked_of = {p: origin(u) for p, u in zip(shard.photo_ids, shard.urls)}
            keep = [r for r in prev if r["status"] not in TRANSIENT and (
                image_exists(out, r["photo_id"], i if tar else None) if r["status"] == "ok"
                else origin(r["url"]) == asked_of.get(r["photo_id"]))]
            if len(keep) == len(shard.photo_ids):
                continue
            kept = {r["photo_id"] for r in keep}
            shard.done = keep
            pairs = [(p, u) for p, u in zip(shard.photo_ids, shard.urls) if p not in kept]
            shard.photo_ids = [p for p, _ in pairs]
            shard.urls = [u for _, u in pairs]
        todo.append(shard)
    return todo, n_shards
