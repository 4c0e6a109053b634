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

from mining.stages.download.writer import image_exists
from mining.errors import UserError
from mining.photos.flickr import DEFAULT_HOST, photo_url
from collections import Counter

from mining.stages.download.sources import LocalFolder, Source, address
from mining.settings.layout import image_key, named_download_url

REQUIRED = ("photo_id", "server_id", "secret", "secret_original", "extension")
OPTIONAL = ("download_url",)  # the photo hash (image key, the mirror's key); MD5 of the id without it
# Statuses worth asking again on a rerun: the photo may well be there next time.
TRANSIENT = frozenset({"timeout", "throttled_gave_up", "error"})
STATUSES = (
    "ok", "not_found", "gone", "forbidden", "unavailable_placeholder", "too_small",
    "corrupt", "not_jpeg", "too_large", "timeout", "throttled_gave_up", "error", "no_original", "no_download_url",
)


@dataclass
class Shard:
    """One unit of Dask work: thousands of photo jobs, with what earlier runs settled.

    `urls[i]`: photo i's address at each source in order (a URL, a `file://` URI for a local
    source, None where the source cannot have it); a plain string is one source's URL.
    `keys[i]`: its image key (default: the MD5 of the id). `prior[i]`: the `tried` entries an
    earlier run settled for it (final failures at the first sources, with the same addresses),
    which this run does not ask again."""

    index: int
    photo_ids: list[int]
    urls: list
    done: list[dict] = field(default_factory=list)  # final rows kept from an earlier run
    keys: list[str] | None = None
    prior: list[list[dict]] | None = None

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
        table = dataset.to_table(columns=list(REQUIRED) + [c for c in OPTIONAL if c in dataset.schema.names])
    except UserError:
        raise
    except (OSError, pa.ArrowException) as exc:
        raise UserError(f"cannot read candidates {p}: {str(exc).splitlines()[0]}") from None
    if table.column("photo_id").null_count or table.column("server_id").null_count:
        raise UserError(f"candidates {p} have rows without photo_id or server_id")
    return table


def build_jobs(table: pa.Table, sources: list) -> tuple[list[int], list[str], list[tuple[str | None, ...]]]:
    """Photo ids, image keys and each photo's address at every source, in file order,
    duplicates of a photo id dropped.

    A flickr source with `size o` has no URL for a photo without an original secret (Flickr
    withholds it for many): None, recorded as `no_original` without a request; only a column
    empty for every photo is refused as a whole. A multimedia-commons source needs the
    download URL (the photo hash), a local one finds the photo when the plan is made."""
    for s in sources:
        if s.kind == "flickr" and s.size not in ("b", "o"):
            raise UserError(f"--size must be b or o, not {s.size!r}")
        if s.kind == "flickr" and s.size == "o" and table.num_rows and \
                table.column("secret_original").null_count == table.num_rows:
            raise UserError("--size o needs secret_original, which is empty in these candidates")
        if s.kind == "multimedia-commons" and table.num_rows and ("download_url" not in table.column_names or
                                                                  table.column("download_url").null_count == table.num_rows):
            raise UserError(f"source {s.name!r} (multimedia-commons) needs the candidates' download_url "
                            "(the photo hash), which is missing or empty")
    locals_ = {i: LocalFolder(s.path) for i, s in enumerate(sources) if s.local}
    cols = {c: table.column(c).to_pylist() for c in REQUIRED}
    durls = table.column("download_url").to_pylist() if "download_url" in table.column_names else [None] * table.num_rows
    ids: list[int] = []
    keys: list[str] = []
    urls: list[tuple[str | None, ...]] = []
    seen: set[int] = set()
    for (pid, srv, sec, seco, ext), durl in zip(zip(*(cols[c] for c in REQUIRED)), durls):
        if pid in seen:
            continue
        seen.add(pid)
        pid = int(pid)
        # the image key and the mirror's and local copies' addresses come from the download URL's
        # hash: only a URL that names this photo (`/<id>_<secret>.`, YFCC's form) is used; another
        # (broken or hostile metadata) counts as none, so it can never pick another photo's image
        named = named_download_url(pid, sec, durl)
        key = image_key(pid, named)
        flickr = {s.size + (s.host or ""): (None if s.size == "o" and not seco else
                                            photo_url(s.host, s.size, int(srv), pid, sec, seco, ext))
                  for s in sources if s.kind == "flickr"}
        others = (tuple(u for u in flickr.values() if u) + (photo_url(DEFAULT_HOST, "b", int(srv), pid, sec, None, None),)
                  if locals_ else ())
        ids.append(pid)
        keys.append(key)
        urls.append(tuple(address(s, pid, key, named, flickr.get(s.size + (s.host or "")), locals_.get(i), others)
                          for i, s in enumerate(sources)))
    if len(set(keys)) != len(keys):  # two photos, one image file: refused rather than overwritten

        key, n = Counter(keys).most_common(1)[0]
        clash = [p for p, k in zip(ids, keys) if k == key]
        raise UserError(f"photos {', '.join(map(str, clash[:5]))} have the same image key {key} (the same download "
                        "URL); the candidates are not from `mining ingest`")
    return ids, keys, urls


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


def plan_fingerprint(ids: list[int], keys: list[str], shard_size: int, variant: str = "") -> str:
    """Identity of a plan: same candidates, image keys, image sizes (`variant`: the flickr
    sources' sizes) and shard size → same shards.

    Hosts and the list of sources are left out on purpose: resuming from another mirror (or
    from the demo server on a new port), or with a source added, is the same download."""
    h = hashlib.sha256(f"{shard_size}\n{variant}\n".encode())
    for pid, key in zip(ids, keys):
        h.update(f"{pid} {key}\n".encode())
    return h.hexdigest()


def status_path(out: Path, index: int) -> Path:
    return out / "status" / f"shard-{index:05d}.parquet"


def origin(url: str | None) -> str:
    """`scheme://host:port` of a URL, lower case (a string split: millions of URLs on a resume).
    "Same host?" in the download stage is always this: resume and the failure summary agree."""
    return "/".join((url or "").split("/", 3)[:3]).lower()


def tried_of(row: dict) -> list[dict]:
    """The `tried` entries of a status row (a row written before sources had none: its url)."""
    tried = row.get("tried")
    if tried is None:
        return [{"source": None, "url": row.get("url"), "status": row["status"]}]
    return list(tried)


def settled_prefix(row: dict, addresses: tuple) -> list[dict]:
    """The leading `tried` entries of a status row that are final failures at the address
    the plan has for that source now: not asked again. A final failure is final for the
    address that gave it: recorded for another host, the photo is asked again there."""
    out = []
    for t, addr in zip(tried_of(row), addresses):
        if t["status"] in TRANSIENT or t["status"] == "ok" or t["url"] != addr:
            break
        out.append(t)
    return out


def plan_shards(out: Path, ids: list[int], urls: list, shard_size: int, tar: bool = False,
                keys: list[str] | None = None) -> tuple[list[Shard], int]:
    """Shards still to do (complete ones skipped) and the number of shards in the plan.

    A shard whose status file settles every photo is complete: `ok` with its image stored,
    or failed finally at every source (at the addresses the plan has now). Otherwise its
    settled rows are carried over, and the other photos are redone from the first source
    not yet settled for them.
    """
    if shard_size < 1:
        raise UserError("--shard-size must be at least 1")
    keys = keys if keys is not None else [image_key(p) for p in ids]
    urls = [u if isinstance(u, tuple) else (u,) for u in urls]
    todo: list[Shard] = []
    n_shards = (len(ids) + shard_size - 1) // shard_size
    for i in range(n_shards):
        sl = slice(i * shard_size, (i + 1) * shard_size)
        shard = Shard(i, ids[sl], urls[sl], keys=keys[sl], prior=[[] for _ in ids[sl]])
        sp = status_path(out, i)
        if sp.exists():
            prev = {r["photo_id"]: r for r in pq.read_table(sp).to_pylist()}
            keep, prior = [], {}
            for pid, key, addr in zip(shard.photo_ids, shard.keys, shard.urls):
                r = prev.get(pid)
                if r is None:
                    continue
                if r["status"] == "ok":
                    if r.get("photo_hash") == key and image_exists(out, key, i if tar else None):
                        keep.append(r)
                    continue
                settled = settled_prefix(r, addr)
                if len(settled) == len(addr) and r["status"] not in TRANSIENT:
                    keep.append(r)
                else:
                    prior[pid] = settled
            if len(keep) == len(shard.photo_ids):
                continue
            kept = {r["photo_id"] for r in keep}
            shard.done = keep
            jobs = [j for j in zip(shard.photo_ids, shard.keys, shard.urls) if j[0] not in kept]
            shard.photo_ids = [p for p, _, _ in jobs]
            shard.keys = [k for _, k, _ in jobs]
            shard.urls = [u for _, _, u in jobs]
            shard.prior = [prior.get(p, []) for p in shard.photo_ids]
        todo.append(shard)
    return todo, n_shards
