"""The release's check step (`check`): its settings and inputs refused before any work, the selection
read in rank order, and the card's inputs (the audit recomputed against the release's target)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mining.files import atomic
from mining.files.names import AUDIT, DISTRACTORS, EVALUATION, STATS
from mining.publishing import leakbound
from mining.errors import UserError
from mining.publishing.licences import Policy
from mining.settings.options import AuditOptions, ReleaseOptions
from mining.files.tables import read_json, read_table

SELECTION = ("rank", "photo_id", "path", "license_name", "license_url", "user_nsid")


@dataclass(frozen=True)
class Selection:
    """The checked selection and what the card says of it."""

    frame: Any  # the selection's rows, by rank
    path: Path  # its distractors.parquet
    policy: Policy  # the licences to release
    candidates_stats: dict | None  # geofilter's stats.json: the funnel
    evaluation: dict | None  # evaluation.json: the hardness table (and the kit's)
    audit: dict | None  # audit.json, its bound recomputed against the target (leakbound.release_gate)
    review: dict | None = None  # select's stats.json `review`: how much of the review queue was answered


def check(inputs: Any, out: Path, options: ReleaseOptions, target: AuditOptions, workers: int,
          margin: float) -> Selection:
    """`inputs` (the stage's `Inputs`) checked: the settings in range, every input there and of its
    kind, OUT not one of them, a selection that is not empty and an audit that meets the target
    (or is allowed not to)."""
    policy = Policy.parse(options.licenses)
    _check_settings(options, workers, margin)
    if not inputs.images.is_dir():
        raise UserError(f"--images {inputs.images} is not a folder (the download root)")
    if options.kit and (inputs.evaluation is None or not inputs.descriptors):
        raise UserError(f"--kit (release.kit, on by default) needs --evaluation (the run's {EVALUATION}) and "
                        "--descriptors DESC/<method> ...; without them give --no-kit")
    table_path = inputs.selected / DISTRACTORS if inputs.selected.is_dir() else inputs.selected
    atomic.refuse_over_inputs(out, {"--selected": table_path, "--images": inputs.images, "--audit": inputs.audit,
                                    "--manifest": inputs.manifest}, marker="release.parquet")
    frame = read_table(table_path, SELECTION, "selection", hint="make it with `mining select`").to_pandas()
    frame = frame.sort_values("rank", kind="stable").reset_index(drop=True)
    cand_stats = read_json(inputs.candidates_stats, "candidates stats") if inputs.candidates_stats else None
    evaluation = read_json(inputs.evaluation, "evaluation") if inputs.evaluation else None
    audit = read_json(inputs.audit, "audit") if inputs.audit else None  # the set's measured leak rate (`mining audit`)
    if frame.empty:
        raise UserError(f"{table_path}: nothing to release, 0 images: " + (
            f"the leak audit removed all {audit['set_size']} images of the selection (landmark or unclear "
            f"answers and their near-duplicates; see its {AUDIT})" if isinstance(audit, dict)
            and audit.get("set_size") and audit.get("released_set_size") == 0
            else "the selection is empty"))
    # the card's audit: recomputed from its counts against this release's target, never as the file says
    audit = leakbound.release_gate(audit, target.over_target == "allow", frame.photo_id, target.max_leak_rate,
                                   target.confidence, folder=Path(inputs.audit).parent if inputs.audit else None)
    if inputs.manifest is not None and not inputs.manifest.is_file():
        raise UserError(f"manifest not found: {inputs.manifest}")
    select_stats = table_path.parent / STATS  # select's, beside its distractors.parquet
    doc = read_json(select_stats, "selection stats") if select_stats.is_file() else None
    review = doc.get("review") if isinstance(doc, dict) else None
    return Selection(frame, table_path, policy, cand_stats, evaluation, audit,
                     review if isinstance(review, dict) else None)


def _check_settings(options: ReleaseOptions, workers: int, margin: float) -> None:
    if not 0 < options.face_threshold <= 1:
        raise UserError("--face-threshold must be in (0, 1]")
    if options.min_face_px < 12:
        raise UserError("--min-face-px must be at least 12 px (MTCNN's smallest window)")
    if options.shard_size < 1 or workers < 1:
        raise UserError("--shard-size and --workers must be at least 1")
    if not 0 <= margin <= 5:  # nan fails this too
        raise UserError(f"--margin must be a number from 0 to 5 (a share of the face box on each side), got {margin}")
