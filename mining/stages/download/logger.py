"""What the user sees: a progress bar while it runs, and `summary.json` when it ends.

Counts come from the status files (the latest row per photo), so the summary is the truth
about DIR after any number of interrupted and resumed runs; speeds are this run's.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from mining.files import atomic
from mining.files.names import IMAGES_SUMMARY
from mining.photos import imageindex
from mining.stages.download.reader import STATUSES, TRANSIENT, origin, status_path, tried_of
from mining.stages.download.writer import STATUS_SCHEMA, tar_path
from mining.settings.layout import key_relpath
from mining.console.progress import bar


def progress_bar(total: int, initial: int = 0) -> Any:
    return bar(total=total, initial=initial, unit="img", desc="download", smoothing=0.1)


def read_status(out: Path) -> pa.Table:
    """All status rows of a download folder (empty table if none yet)."""
    folder = out / "status"
    files = sorted(folder.glob("shard-*.parquet")) if folder.is_dir() else []
    if not files:
        return STATUS_SCHEMA.empty_table()
    return ds.dataset([str(f) for f in files], format="parquet").to_table()


def duplicate_groups(status: pa.Table, limit: int = 1000) -> tuple[int, list[list[int]]]:
    """Exact duplicates among `ok` images: number of groups and (some of) the groups."""
    ok = status.filter(pc.equal(status.column("status"), "ok"))
    groups = ok.group_by("sha256").aggregate([("photo_id", "list")])
    groups = groups.filter(pc.greater(pc.list_value_length(groups.column("photo_id_list")), 1))
    lists = [sorted(g) for g in groups.column("photo_id_list").to_pylist()]
    lists.sort()
    return len(lists), lists[:limit]


# What each failure status means, for the one line a failing download ends with.
EXPLAIN = {
    "error": "no HTTP answer: connection refused, unknown host or network down",
    "timeout": "no answer within --timeout",
    "not_found": "HTTP 404",
    "gone": "HTTP 410",
    "forbidden": "HTTP 403",
    "unavailable_placeholder": "redirected to a placeholder or to another host",
    "too_small": "image smaller than --min-size",
    "corrupt": "truncated or corrupt JPEG",
    "not_jpeg": "not a JPEG (a web page?)",
    "too_large": "an answer larger than any image the source serves (refused unread past the cap)",
    "throttled_gave_up": "throttled (429/503) for longer than --max-throttle-wait",
    "no_original": "no original secret in the metadata (--size o): not requested",
    "no_download_url": "no download URL in the candidates (no photo hash for the mirror): not requested",
}


def most_common_failure(status: pa.Table, host: str) -> str:
    """`status (what it means) for N photos`, over the failed rows (those from `host` when any)."""
    failed = status.filter(pc.not_equal(status.column("status"), "ok")).select(["url", "status", "http_code"])
    rows = failed.to_pylist()
    here = origin(host.split(", ")[0])  # the first source's
    rows = [r for r in rows if origin(r["url"]) == here] or rows
    if not rows:
        return "none recorded"
    (st, code), n = Counter((r["status"], r["http_code"]) for r in rows).most_common(1)[0]
    what = f"HTTP {code}" if st == "error" and code else EXPLAIN.get(st, st)
    return f"{st} ({what}) for {n} photo{'s' if n != 1 else ''}"


def judge(status: pa.Table, ok: int, results: list[dict], host: str, min_ok_fraction: float,
          stopped_early: bool) -> str | None:
    """None for a download that (mostly) worked, else the one line that says why it failed.

    Failed: this run gave up early (its first photos all failed), or fewer than
    `min_ok_fraction` of the photos with a status are `ok` (0 turns both checks off).
    """
    if min_ok_fraction <= 0:
        return None
    recorded = status.num_rows
    if stopped_early:
        tried = sum(sum(r["counts"].values()) for r in results)
        what = f"download stopped: none of the {tried} photos tried in this run could be downloaded from {host}"
    elif recorded and ok < min_ok_fraction * recorded:
        what = (f"download failed: only {ok} of {recorded} photos ({100 * ok / recorded:.1f}%) could be downloaded "
                f"from {host}, below download.min_ok_fraction = {min_ok_fraction:g} (--min-ok-fraction)")
    else:
        return None
    return (f"{what}; most common failure: {most_common_failure(status, host)}. Is the image host right? Set "
            "`download.host` or `download.sources` in the manifest (--host, --source); statuses are kept, so "
            "rerunning resumes")


_INDEXED = ["photo_id", "status", "source", "low_res", "tried", "width", "height", "sha256"]  # what the index takes


def latest_rows(out: Path, n_shards: int) -> list[tuple[int, dict]]:
    """(shard index, status row) of every photo recorded in DIR (each status file holds the
    latest row of each of its photos)."""
    found = []
    for i in range(n_shards):
        sp = status_path(out, i)
        if sp.exists():
            found.extend((i, r) for r in pq.read_table(sp, columns=_INDEXED).to_pylist())
    return found


def write_index(out: Path, ids: list[int], keys: list[str], shard_size: int, tar: bool) -> Path:
    """DIR/index.parquet (`mining.photos.imageindex`): one row per candidate photo, from the latest
    status rows (a photo no run has settled yet: status `not_tried`). Deterministic: no times."""
    n_shards = (len(ids) + shard_size - 1) // shard_size
    recorded = {r["photo_id"]: (i, r) for i, r in latest_rows(out, n_shards)}
    rows = []
    for pos, (pid, key) in enumerate(zip(ids, keys)):
        i, r = recorded.get(pid, (pos // shard_size, None))
        if r is None:
            rows.append({"photo_id": pid, "photo_hash": key, "status": "not_tried", "urls": []})
            continue
        ok = r["status"] == "ok"
        rows.append({
            "photo_id": pid, "photo_hash": key, "status": r["status"], "source": r.get("source") if ok else None,
            "low_res": bool(r.get("low_res")) if ok else None,
            "path": (None if tar else key_relpath(key)) if ok else None,
            "tar": tar_path(Path("."), i).as_posix() if ok and tar else None,
            "urls": [t["url"] for t in tried_of(r) if t["url"]],
            "width": r["width"] if ok else None, "height": r["height"] if ok else None,
            "sha256": r["sha256"] if ok else None,
        })
    return imageindex.write(out, rows)


def per_source(status: pa.Table, sources: tuple = ()) -> tuple[dict, dict]:
    """Per source (by name, in the sources' order): photos asked, served, failures by status;
    and the run's `alive_full_res`, `alive_low_res_only`, `gone_everywhere` counts (columnar:
    millions of rows)."""
    names = [s.name for s in sources]
    table: dict[str, dict] = {}
    if "tried" in status.column_names and status.num_rows:
        flat = pc.list_flatten(status.column("tried"))
        pairs = pa.table({"source": pc.fill_null(pc.struct_field(flat, "source"), "?"),
                          "status": pc.struct_field(flat, "status")})
        for r in pairs.group_by(["source", "status"]).aggregate([([], "count_all")]).to_pylist():
            d = table.setdefault(r["source"], {"asked": 0, "served": 0, "failed": {}})
            d["asked"] += r["count_all"]
            if r["status"] == "ok":
                d["served"] += r["count_all"]
            else:
                d["failed"][r["status"]] = r["count_all"]
    st = status.column("status")
    ok = pc.equal(st, "ok")
    low = pc.fill_null(status.column("low_res"), False) if "low_res" in status.column_names else \
        pa.array([False] * status.num_rows)
    final_fail = pc.invert(pc.or_(ok, pc.is_in(st, value_set=pa.array(sorted(TRANSIENT)))))
    alive = {"alive_full_res": pc.sum(pc.and_(ok, pc.invert(low))).as_py() or 0,
             "alive_low_res_only": pc.sum(pc.and_(ok, low)).as_py() or 0,
             "gone_everywhere": pc.sum(final_fail).as_py() or 0}
    order = names + sorted(n for n in table if n not in names)
    empty = {"asked": 0, "served": 0, "failed": {}}
    return {n: {**table.get(n, empty), "failed": dict(sorted(table.get(n, empty)["failed"].items()))}
            for n in order}, alive


def summarize(out: Path, results: list[dict], seconds: float, planned: int, dashboard: str | None,
              host: str = "", min_ok_fraction: float = 0.0, stopped_early: bool = False, sources: tuple = ()) -> dict:
    """Write DIR/summary.json and return it; its `failure` is None or why the download failed."""
    status = read_status(out)
    counts = {s: 0 for s in STATUSES}
    for s, n in zip(*pc.value_counts(status.column("status")).flatten()) if status.num_rows else []:
        counts[s.as_py()] = n.as_py()
    n_dups, dups = duplicate_groups(status)
    ok_now = sum(r["counts"].get("ok", 0) for r in results)
    tried_now = sum(sum(r["counts"].values()) for r in results)
    bytes_now = sum(r["bytes"] for r in results)
    by_source, alive = per_source(status, sources)
    summary = {
        "photos": planned,
        "recorded": status.num_rows,
        "counts": counts,
        **alive,
        "sources": by_source,
        "this_run": {
            "shards": len(results),
            "photos": tried_now,
            "ok": ok_now,
            "requests": sum(r["requests"] for r in results),
            "seconds": round(seconds, 3),
            "images_per_s": round(ok_now / seconds, 2) if seconds > 0 else 0.0,
            "photos_per_s": round(tried_now / seconds, 2) if seconds > 0 else 0.0,
            "bytes_per_s": round(bytes_now / seconds, 1) if seconds > 0 else 0.0,
        },
        "duplicate_sha256_groups": n_dups,
        "duplicates": dups,
        "dashboard": dashboard,
        "failure": judge(status, counts["ok"], results, host, min_ok_fraction, stopped_early),
    }
    atomic.write_json(out / IMAGES_SUMMARY, summary)
    return summary


def format_summary(s: dict) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in s["counts"].items() if v)
    r = s["this_run"]
    per = "; ".join(f"{name}: {d['served']}/{d['asked']} served"
                    + (" (" + ", ".join(f"{k} {v}" for k, v in d["failed"].items()) + ")" if d["failed"] else "")
                    for name, d in s.get("sources", {}).items())
    return (f"{s['recorded']}/{s['photos']} photos recorded: {counts or 'nothing'}; alive: "
            f"{s.get('alive_full_res', 0)} full-res, {s.get('alive_low_res_only', 0)} low-res only, "
            f"{s.get('gone_everywhere', 0)} gone everywhere" + (f"; {per}" if per else "") + f"; this run "
            f"{r['photos']} photos in {r['seconds']:.1f} s ({r['images_per_s']} ok img/s, "
            f"{r['bytes_per_s'] / 1e6:.1f} MB/s); {s['duplicate_sha256_groups']} duplicate sha256 group(s)")
