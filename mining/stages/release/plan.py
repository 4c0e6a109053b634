"""The release's plan step: which images to check (the licence policy's), their sources'
stamps, and the staging folder a stopped run resumes in."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from mining.files import atomic
from mining.errors import UserError
from mining.publishing.licences import licence_code
from mining.settings.options import ReleaseOptions
from mining.publishing.version import code_version
from mining.stages.release.selection import Selection

log = logging.getLogger(__name__)

JOURNAL = ".journal.jsonl"  # in the staging folder: one line per image checked, after its file
SETTINGS = ".settings.json"  # in the staging folder: what the journal's lines were made with
REBUILD = "rebuild.json"  # in the release: what a rebuild compares (the card names it)


@dataclass(frozen=True)
class Plan:
    """What the release checks, and where."""

    codes: list[str | None]  # each selected row's licence code (None: unknown)
    todo: list[int]  # the rows the licence policy allows: their images are checked
    sources: dict[int, list[int]]  # [size, mtime_ns] of each of those images: the resume's stamp
    staging: Path  # the folder the release is made in (OUT swapped for it when done)
    done: dict[int, dict]  # journal records (by row) of the images a stopped run finished


def work(sel: Selection, images: Path, out: Path, options: ReleaseOptions, margin: float) -> Plan:
    """The rows to check and their images' stamps, found before any work (a missing image is
    refused), and the staging folder: a stopped run's with the same settings, or a new one."""
    codes = [licence_code(n, u) for n, u in zip(sel.frame.license_name, sel.frame.license_url)]
    todo = [i for i, (n, u, c) in enumerate(zip(sel.frame.license_name, sel.frame.license_url, codes))
            if sel.policy.allows(n, u, c)]
    sources = {}
    for i in todo:
        stamp = _source_stamp(images / sel.frame.path[i])
        if stamp is None:
            raise UserError(f"image of photo {sel.frame.photo_id[i]} not found: {images / sel.frame.path[i]} "
                            "(is --images the download root of this selection?)")
        sources[i] = stamp
    staging = out.parent / f".{out.name}.partial"
    settings = {"selection_sha256": hashlib.sha256(sel.path.read_bytes()).hexdigest(),
                "images": str(images.resolve()), "licenses": list(sel.policy.spec), "blur": bool(options.blur_faces),
                "threshold": options.face_threshold, "min_face": int(options.min_face_px), "margin": margin,
                "code": code_version()}
    done = resume(staging, settings, sources, {i: str(sel.frame.path[i]) for i in todo})
    return Plan(codes, todo, sources, staging, done)


def _source_stamp(path: Path) -> list[int] | None:
    """[size, mtime_ns] of a regular file (None: absent or not a file)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns] if stat.S_ISREG(st.st_mode) else None


def resume(staging: Path, settings: dict, sources: dict[int, list[int]], paths: dict[int, str]) -> dict[int, dict]:
    """The journal records (by selection row) of images that a stopped run with the same
    settings finished, and a staging folder to go on in. Anything else starts over: other
    settings, a selection or code that changed, a source image replaced since (size or
    mtime), a released file missing; a torn last line (the run died writing it) is dropped."""
    records: dict[int, dict] = {}
    if staging.exists():
        try:
            same = json.loads((staging / SETTINGS).read_text()) == json.loads(json.dumps(settings))
        except (OSError, ValueError):
            same = False
        if not same:
            shutil.rmtree(staging)
        elif (staging / JOURNAL).exists():
            for line in (staging / JOURNAL).read_bytes().splitlines():
                try:
                    r = json.loads(line)
                    row = int(r["row"])
                except (ValueError, KeyError, TypeError):
                    continue  # a torn line: the run died while writing it
                if sources.get(row) != r.get("source"):
                    continue  # not a row to release now, or its image changed since
                if r["status"] == "released" and not (staging / paths[row]).is_file():
                    continue
                records[row] = r
            # the journal again with only what is kept: new lines never follow a torn one
            atomic.write_bytes(staging / JOURNAL, b"".join(json.dumps(r).encode() + b"\n" for r in records.values()))
            if records:
                log.info("release: resuming a stopped run; %d of %d images were already checked",
                         len(records), len(sources))
    if not staging.exists():
        staging.mkdir(parents=True)
        atomic.write_json(staging / SETTINGS, settings)
    return records
