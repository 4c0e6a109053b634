"""The release's publish step: the released images' attribution, release.parquet, the kit,
the WebDataset shards, stats.json, the dataset card and SHA256SUMS, written in the staging
folder, which then replaces OUT as a whole."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pyarrow as pa

from mining import pins
from mining.files import atomic
from mining.files.names import DISTRACTORS_TXT, STATS, STORE
from mining.publishing.attribution import attribution_csv, attribution_md, credit_fields, load_candidate_meta
from mining.files.checksums import sha256sums
from mining.errors import UserError
from mining.kit.write import write_kit
from mining.publishing.licences import UNKNOWN, licence_label
from mining.methods import get_method
from mining.retrieval.descriptors import payload_digest
from mining.settings.options import ReleaseOptions
from mining.publishing.version import code_version
from mining.stages.release import card
from mining.stages.release.blur import BLUR_SIGMA, DETECTOR, Outcome
from mining.stages.release.selection import Selection
from mining.stages.release.plan import REBUILD, Plan

UNKNOWN_LISTED = 20  # unknown licences (name and URL as found) listed on the card, most frequent first


def release(*, inputs: Any, out: Path, options: ReleaseOptions, margin: float, sel: Selection, plan: Plan,
            outcome: Outcome) -> dict:
    """RELEASE/ from the staging folder (`inputs`: the stage's `Inputs`); its stats.json."""
    released = outcome.released(plan.todo)
    _refuse_nothing(sel, outcome.status, released)
    n_blurred = sum(outcome.blurred)
    rel = _attribution(plan.staging, sel.frame.iloc[released].reset_index(drop=True), inputs.candidates, n_blurred)
    table = _table(sel.frame, plan.codes, outcome)
    atomic.write_parquet(plan.staging / "release.parquet", pa.Table.from_pandas(table, preserve_index=False))
    kit_stats = None
    if options.kit:  # the evaluation kit (mining.kit): the selection's descriptors, as the run evaluated them
        shutil.rmtree(plan.staging / "kit", ignore_errors=True)  # a stopped run's, made before the swap
        kit_stats = write_kit(plan.staging / "kit", inputs.descriptors, sel.frame[["rank", "photo_id", "path"]].assign(
            released=[st == "released" for st in outcome.status]), sel.evaluation, method_of=get_method)
    shards = write_webdataset(plan.staging, rel, table, options.shard_size) if options.tar else []
    by_licence, unknown = _licence_counts(table)
    excluded = Counter(s for s in outcome.status if s != "released")
    stats = {
        "selected": int(len(sel.frame)),
        "released": int(len(released)),
        "excluded": dict(sorted(excluded.items())),
        "checked_for_faces": int(len(plan.todo)) if options.blur_faces else 0,
        "with_faces": int(sum(1 for i in plan.todo if outcome.faces[i])),
        "blurred": int(n_blurred),
        "faces_blurred": int(sum(len(outcome.faces[i]) for i in released if outcome.blurred[i])),
        "byte_copies": int(len(released) - n_blurred),
        "licences": {"policy": sel.policy.label, "spec": list(sel.policy.spec),
                     "per_licence": dict(sorted(by_licence.items())), "unknown": int(sum(unknown.values())),
                     "unknown_seen": dict(sorted(unknown.items(), key=lambda kv: (-kv[1], kv[0]))[:UNKNOWN_LISTED])},
        "faces": {"blur": bool(options.blur_faces), "detector": DETECTOR if options.blur_faces else None,
                  "threshold": options.face_threshold, "min_face_px": int(options.min_face_px), "margin": margin,
                  "blur_sigma_of_box": BLUR_SIGMA},
        "webdataset_shards": shards,
        "audit": sel.audit,
        "review": sel.review,
        "kit": kit_stats,
        "sources": card.sources(sel.frame, released, inputs.images),
        "code": code_version(),
        "rebuild": rebuild_digests(sel.frame.photo_id, inputs.descriptors),
        "manifest": ({"path": str(inputs.manifest), "sha256": hashlib.sha256(inputs.manifest.read_bytes()).hexdigest()}
                     if inputs.manifest is not None else None),
    }
    atomic.write_json(plan.staging / STATS, stats)
    atomic.write_json(plan.staging / REBUILD, stats["rebuild"])
    atomic.write_text(plan.staging / "README.md", card.dataset_card(stats, sel.candidates_stats, sel.evaluation))
    atomic.write_text(plan.staging / "SHA256SUMS",
                      sha256sums(plan.staging, {sel.frame.path[i]: outcome.sha[i] for i in released}))
    atomic.swap_in_folder(plan.staging, out)
    return stats


def rebuild_digests(selected_ids: Any, descriptors: tuple[Path, ...]) -> dict:
    """What a rebuild compares to know it is this set (docs/reproducibility.md): the selected photo
    ids in rank order, each method's stores (`payload_digest`), the lock and the SIMD level; nothing
    that names the machine, so the same run anywhere writes the same file."""
    ids = np.asarray(selected_ids, np.int64)
    fp = pins.fingerprint()
    stores = {str(store.relative_to(Path(folder).parent)): payload_digest(store)
              for folder in descriptors for store in sorted(p.parent for p in Path(folder).rglob(STORE))}
    return {"selected": int(len(ids)), "selected_ids_sha256": hashlib.sha256(ids.tobytes()).hexdigest(),
            "stores_sha256": dict(sorted(stores.items())), "lock_sha256": fp["lock_sha256"], "simd": fp["simd"]}


def _refuse_nothing(sel: Selection, status: list[str], released: list[int]) -> None:
    """No image to release: one line that counts why (the run's own checks stay in the staging
    folder, so a rerun does not redo them)."""
    if released:
        return
    why = {"licence": "under a licence the policy leaves out", "licence_unknown": "under an unknown licence",
           "undecodable": "undecodable", "noderivs_face": "NoDerivs with a face"}
    n = len(sel.frame)
    raise UserError(f"nothing to release, 0 images: of {n} selected images " + ", ".join(
        f"{k} of {n} {why.get(st, st)}" for st, k in sorted(Counter(status).items())) +
        f" (licence policy {sel.policy.label}: --licenses)")


def _attribution(staging: Path, rel: Any, candidates: Path | None, n_blurred: int) -> Any:
    """distractors.txt and ATTRIBUTION.csv/.md of the released rows `rel` (ranked again from 1),
    which it returns."""
    import pandas as pd

    if candidates is not None:
        meta = load_candidate_meta(candidates, rel.photo_id.to_numpy(np.int64))
    else:  # no titles; pages built from owner and id
        meta = pd.DataFrame({"title": [None] * len(rel), "page_url": None, "user_nsid": rel.user_nsid.to_numpy()})
    titles, pages = credit_fields(meta, rel.photo_id.to_numpy(np.int64))
    if "user_nickname" not in rel:
        rel["user_nickname"] = None
    rel["rank"] = np.arange(1, len(rel) + 1, dtype=np.int64)  # rank within the release
    changes = ("Images are unmodified except for resizing to 1024 px on the long side by Flickr"
               + (f", and for {n_blurred} image(s) whose faces were blurred (`blurred` in release.parquet)."
                  if n_blurred else "."))
    atomic.write_text(staging / DISTRACTORS_TXT, "".join(p + "\n" for p in rel.path))
    atomic.write_text(staging / "ATTRIBUTION.csv", attribution_csv(rel, titles, pages))
    atomic.write_text(staging / "ATTRIBUTION.md", attribution_md(rel, titles, pages, changes=changes))
    return rel


def _table(frame: Any, codes: list[str | None], outcome: Outcome) -> Any:
    """release.parquet's rows: one per selected image, released or why not."""
    import pandas as pd

    return pd.DataFrame({
        "selection_rank": frame["rank"].to_numpy(np.int64),
        "photo_id": frame.photo_id.to_numpy(np.int64),
        "photo_hash": (frame.photo_hash if "photo_hash" in frame else
                       frame.path.map(lambda p: PurePosixPath(str(p)).stem)).astype(str).to_numpy(),
        "source": (frame.source if "source" in frame else pd.Series([None] * len(frame))).to_numpy(object),
        "path": frame.path.astype(str).to_numpy(),
        "license_name": frame.license_name.to_numpy(),
        "license_url": frame.license_url.to_numpy(),
        "license_code": codes,
        "status": outcome.status,
        "faces": np.array([len(f) for f in outcome.faces], np.int32),
        "face_boxes": [json.dumps([list(b) for b in f]) for f in outcome.faces],
        "blurred": outcome.blurred,
        "sha256": outcome.sha,
    })


def _licence_counts(table: Any) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Per licence: selected, released, blurred and with faces; and the unknown licences as
    found ("name <url>") with their photos."""
    by_licence: dict[str, dict[str, int]] = {}
    unknown: dict[str, int] = {}
    for row in table.itertuples(index=False):
        name = licence_label(row.license_name, row.license_url)
        if name == UNKNOWN:
            seen = " ".join(str(v) if isinstance(v, str) and v else "–" for v in (row.license_name, row.license_url))
            unknown[seen] = unknown.get(seen, 0) + 1
        d = by_licence.setdefault(name, {"selected": 0, "released": 0, "blurred": 0, "with_faces": 0})
        d["selected"] += 1
        d["released"] += row.status == "released"
        d["blurred"] += bool(row.blurred)
        d["with_faces"] += row.faces > 0
    return by_licence, unknown


def write_webdataset(root: Path, rel: Any, table: Any, shard_size: int) -> list[str]:
    """WebDataset shards `webdataset/release-NNNNNN.tar`: per image `<key>.jpg` and `<key>.json`
    (photo id, licence, owner, blurred), in release order, mtime 0, owner root, mode 0644:
    loadable by `webdataset` and by Hugging Face `datasets` ("webdataset" folder builder)."""
    info = table.set_index("photo_id")
    names = []
    for start in range(0, len(rel), shard_size):
        name = f"webdataset/release-{start // shard_size:06d}.tar"
        with atomic.atomic_path(root / name) as tmp, tarfile.open(tmp, "w", format=tarfile.USTAR_FORMAT) as tf:
            for row in rel.iloc[start:start + shard_size].itertuples(index=False):
                key = PurePosixPath(row.path).stem  # the image key: YFCC's photo hash
                r = info.loc[int(row.photo_id)]
                side = json.dumps({"photo_id": int(row.photo_id), "path": row.path, "license_name": r.license_name,
                                   "license_url": r.license_url, "license_code": r.license_code,
                                   "owner_nsid": row.user_nsid, "blurred": bool(r.blurred)},
                                  sort_keys=True, ensure_ascii=False).encode()
                for member, data in ((f"{key}.jpg", (root / row.path).read_bytes()), (f"{key}.json", side)):
                    ti = tarfile.TarInfo(member)
                    ti.size, ti.mtime, ti.mode, ti.uid, ti.gid, ti.uname, ti.gname = len(data), 0, 0o644, 0, 0, "", ""
                    tf.addfile(ti, io.BytesIO(data))
        names.append(name)
    return names
