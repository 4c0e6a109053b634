"""The download's image sources (manifest `download.sources`), tried in order for each photo.

A photo goes to the next source only after a final failure at the previous one (404/410/403,
a placeholder, too small, corrupt, not a JPEG); a transient one (429/503 for too long,
timeouts, no answer) ends the photo's attempt with that status, retried on a rerun from the
same source. Kinds:

- `flickr`: Flickr's static URLs (`host`, `size`), today's behaviour;
- `multimedia-commons`: the YFCC100M mirror, `{host}/data/images/<h[0:3]>/<h[3:6]>/<h>.jpg`
  with h the photo hash (`mining.photos.flickr.yfcc_hash` of the row's download URL);
- `local`: a folder a user already has, in the mirror's layout (`data/images/...`), ours
  (`jpg/<3>/<key>.jpg`) or img2dataset's output (`{shard}.parquet` with `url`, `key`,
  `status` next to `{shard}/{key}.jpg`, matched by the row's download URL or Flickr URL);
  found when the plan is made, read without any network request.

Every default lives in the manifest schema: the section's keys (`per_host_rps`, `threads`,
`min_size`, `size`, `host`) and, per kind, `$defs.download_source.x-kind-defaults` (the
mirror's host, `low_res: true` and its smaller `min_size`). A source's unset key takes its
kind's default, else the section's.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

from mining.errors import UserError
from mining.photos.flickr import mirror_relpath, yfcc_hash
from mining.settings.layout import image_relpath
from mining.settings.manifest import check, schema
from mining.settings.options import defaults
from mining.files.plainpaths import regular_inside
from mining.files.yamlfile import Locator

KINDS = ("flickr", "multimedia-commons", "local")
# the status of a photo a source has no address for (not asked): a final failure there
NO_ADDRESS = {"flickr": "no_original", "multimedia-commons": "no_download_url", "local": "not_found"}
_INHERITED = ("per_host_rps", "threads", "min_size", "size")
_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")  # an img2dataset key that is a plain file name


@dataclass(frozen=True)
class Source:
    """One source, every key resolved."""

    kind: str
    name: str
    host: str | None = None  # flickr, multimedia-commons
    size: str = "b"  # flickr
    path: str | None = None  # local
    rps: float = 0.0
    threads: int = 64
    min_size: int = 1024
    low_res: bool = False

    @property
    def local(self) -> bool:
        return self.kind == "local"

    def describe(self) -> str:
        return f"{self.name} ({self.path if self.local else self.host})"


def schema_parts() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The download section's schema, the source entry's schema and the `$defs`."""
    full = schema()
    return full["properties"]["download"], full["$defs"]["download_source"], full["$defs"]


def section_defaults() -> dict[str, Any]:
    """Every default of the download section (the schema's, `mining.settings.options`)."""
    return {k: v for k, v in asdict(defaults("download")).items() if v is not None}


def kind_defaults() -> dict[str, dict[str, Any]]:
    return schema_parts()[1]["x-kind-defaults"]


def check_entries(entries: Any, where: str) -> list[dict[str, Any]]:
    """Validate source entries (from a manifest, `--sources-json` or `--source`) against the
    schema: kinds, keys, http(s) hosts, unique names, a path for a local one."""
    section, entry_schema, defs = schema_parts()
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{where}: sources must be a non-empty list of {{kind: ..., ...}} entries")
    loc = Locator(where, None, what="download sources")
    check(entries, {"$defs": defs, **section["properties"]["sources"]}, loc, ("sources",))
    names: set[str] = set()
    for i, e in enumerate(entries):
        name = e.get("name", e["kind"])
        if name in names:
            raise loc.error(("sources", i, "name"), f"two sources are named {name!r} (give each its own `name`)")
        names.add(name)
        if e["kind"] == "local" and "path" not in e:
            raise loc.error(("sources", i), "a local source needs `path` (the folder)")
        if e["kind"] != "local" and "path" in e:
            raise loc.error(("sources", i, "path"), f"`path` is for local sources, not {e['kind']}")
        if e["kind"] == "local" and "host" in e:
            raise loc.error(("sources", i, "host"), "a local source has no host")
        if e["kind"] != "flickr" and "size" in e:
            raise loc.error(("sources", i, "size"), "`size` is for flickr sources")
    return entries


def section_entries(section: dict[str, Any], where: str = "manifest") -> list[dict[str, Any]]:
    """The source entries of a download section: `sources`, or the one flickr source that
    `host`/`size` describe. With `sources`, a flickr entry without a host takes `host`, and a
    `host` other than the default must be the host of one of its flickr sources (two
    contradicting answers are refused, not guessed at)."""
    if "sources" not in section or section["sources"] is None:
        return [{"kind": "flickr", "host": section.get("host") or kind_defaults()["flickr"]["host"]}]
    entries = check_entries(section["sources"], where)
    host = section.get("host")
    if not host:
        return entries
    # a flickr entry without a host takes the section's (as per_host_rps, threads, ...)
    entries = [{**e, "host": e.get("host", host)} if e["kind"] == "flickr" else e for e in entries]
    if host != section_defaults()["host"] and host not in {e["host"] for e in entries if e["kind"] == "flickr"}:
        raise UserError(f"{where}: download.host {host!r} and download.sources disagree (no flickr source has "
                        "that host); `sources` supersedes `host`: set the host in the source entry")
    return entries


def resolve(entries: list[dict[str, Any]], section: dict[str, Any]) -> list[Source]:
    """Sources with every key set: the entry's, else its kind's default, else the section's."""
    kinds = kind_defaults()
    out = []
    for e in entries:
        kind = e["kind"]
        val = {**{k: section[k] for k in _INHERITED if section.get(k) is not None}, **kinds[kind], **e}
        host = val.get("host") if kind != "local" else None
        if host is not None and urlsplit(host).scheme not in ("http", "https"):
            raise UserError(f"source {val.get('name', kind)!r}: host {host!r} is not an http:// or https:// URL")
        path = None
        if kind == "local":
            p = Path(str(val["path"])).expanduser()
            if not p.is_dir():
                raise UserError(f"local source {val.get('name', kind)!r}: {p} is not a folder")
            path = str(p.resolve())
        out.append(Source(kind=kind, name=str(val.get("name", kind)), host=host.rstrip("/") if host else None,
                          size=str(val.get("size", "b")), path=path, rps=float(val.get("per_host_rps", 0.0)),
                          threads=int(val.get("threads", 64)), min_size=int(val.get("min_size", 1024)),
                          low_res=bool(val.get("low_res", False))))
    return out


_TYPES = {"per_host_rps": float, "threads": int, "min_size": int}


def parse_spec(text: str) -> dict[str, Any]:
    """`kind=multimedia-commons,name=mirror,host=https://...,per_host_rps=5,low_res=true` → an
    entry (`--source`; a value with a comma needs `--sources-json`)."""
    entry: dict[str, Any] = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key:
            raise UserError(f"--source {text!r}: expected key=value pairs separated by commas, like "
                            "kind=multimedia-commons,host=https://...")
        if key in entry:
            raise UserError(f"--source {text!r}: {key} given twice")
        if key == "low_res":
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise UserError(f"--source {text!r}: low_res must be true or false")
            entry[key] = value.lower() in ("true", "1", "yes")
        elif key in _TYPES:
            try:
                entry[key] = _TYPES[key](value)
            except ValueError:
                raise UserError(f"--source {text!r}: {key} must be a number") from None
        else:
            entry[key] = value
    return entry


def parse_json(text: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"--sources-json is not JSON: {exc.msg} at character {exc.pos}") from None
    return data


def address(src: Source, photo_id: int, key: str, download_url: str | None, flickr_url: str | None,
            local: "LocalFolder | None" = None, other_urls: tuple[str, ...] = ()) -> str | None:
    """Where `src` has this photo (an http(s) URL, or a `file://` URI for a local source);
    None when it cannot have it (no original secret, no download URL, not in the folder).
    `key`: `mining.settings.layout.image_key(photo_id, download_url)`."""
    if src.kind == "flickr":
        return flickr_url
    if src.kind == "multimedia-commons":  # with a download URL, the key is its photo hash
        return f"{src.host}/{mirror_relpath(key)}" if download_url else None
    assert local is not None
    return local.find(photo_id, key, download_url, other_urls)


def local_path(uri: str) -> Path:
    return Path(unquote(urlsplit(uri).path))


class LocalFolder:
    """A folder of images a user has: the mirror's layout, ours, or img2dataset's output.

    Only regular files whose real path lies inside the folder are adopted (a symbolic link, or
    a path through a linked folder, that leads out of it is not there: its bytes would be
    published as the photo). Every `.parquet` found (links not followed) is read: one that
    cannot be read is an error naming it, not a shard's images silently missing; one without
    img2dataset's `url` and `key` columns is not img2dataset's and is left alone."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.real = os.path.realpath(self.root)
        self.by_url: dict[str, Path] = {}
        for f in _parquet_files(self.root):
            try:
                names = pq.read_schema(f).names
                if not {"url", "key"} <= set(names):
                    continue
                t = pq.read_table(f, columns=["url", "key"] + (["status"] if "status" in names else [])).to_pydict()
            except (OSError, pa.ArrowException) as exc:
                raise UserError(f"local source {self.root}: {f} is not a readable Parquet file ({exc}); an "
                                "img2dataset shard's list of images? repair or remove it") from None
            folder = f.with_suffix("")  # img2dataset: {shard}.parquet beside {shard}/{key}.jpg
            status = t.get("status") or [None] * len(t["url"])
            for url, key, st in zip(t["url"], t["key"], status):
                if url and isinstance(key, str) and _KEY.fullmatch(key) and st in (None, "success"):
                    self.by_url.setdefault(str(url), folder / f"{key}.jpg")

    def find(self, photo_id: int, key: str, download_url: str | None, urls: tuple[str, ...] = ()) -> str | None:
        rels = [image_relpath(photo_id, download_url)]
        if download_url:
            rels = [mirror_relpath(yfcc_hash(download_url))] + rels + [image_relpath(photo_id)]
        for rel in rels:
            p = self.root / rel
            if regular_inside(p, self.real):
                return p.as_uri()
        for u in (download_url, *urls):
            p2 = self.by_url.get(u) if u else None
            if p2 is not None and regular_inside(p2, self.real):
                return p2.resolve().as_uri()
        return None


def _parquet_files(root: Path) -> list[Path]:
    """The regular `.parquet` files under root, sorted, without following any link."""
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        found += [Path(folder) / n for n in files if n.endswith(".parquet") and not os.path.islink(Path(folder) / n)]
    return sorted(found)
