"""`mining audit`: a measured leak rate of the final selection, with a confidence bound.

Two steps around a review (docs/stages.md, docs/protocols.md), one entry point each:

- `run_draw`: a seeded random sample of SELECTED/distractors.parquet, stratified by rank (mining.publishing.leakbound:
  the hardest 5 % of the set, then to 20 %, 50 %, the rest; more of the hard ones than their share),
  sized so that finding no landmark image bounds the set's leak rate at `max_leak_rate` with
  `confidence`. AUDIT/audit_queue.parquet is a review queue of its own (`mining review import` into
  AUDIT/audit.sqlite; the app asks "does this show any of these landmarks?", every landmark's queries
  beside it; each item is filed under the photo's closest landmark), AUDIT/plan.json the design.
- `run_estimate`: the answers (AUDIT/decisions.parquet from `mining review export`) → AUDIT/audit.json
  (the estimated share of landmark images in the set, its one-sided upper bound and the method:
  mining.publishing.leakbound) and AUDIT/distractors.parquet + .txt: the selection less every photo the audit
  found to show a landmark (`landmark` or `unclear`: both count as leaks, conservatively) and less
  the members of their near-duplicate groups (NEARDUP/neardup.parquet: a near-copy of a landmark
  photo shows the landmark too). `released_upper` bounds that set's rate (mining.publishing.leakbound); `mining
  release` publishes the set, and refuses it when that bound is above the target unless told otherwise.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mining.files import answers, atomic
from mining.files.checksums import file_sha256
from mining.files.names import AUDIT, AUDIT_DB, AUDIT_PLAN, AUDIT_QUEUE, DECISIONS, DISTRACTORS, DISTRACTORS_TXT
from mining.publishing import leakbound
from mining.errors import UserError
from mining.settings.options import AuditOptions
from mining.files.tables import load_decisions, read_json, read_table

SELECTION = ("rank", "photo_id")


def sample_digest(sampled_ids: list[list[int]]) -> str:
    """The digest of the audit sample's photos (plan.json's `sampled_ids`): the `queue_digest` its
    queue, its database and its answers carry (mining.files.answers)."""
    return answers.queue_digest([p for ids in sampled_ids for p in ids])


def _selection(selected: Path) -> Any:
    path = selected / DISTRACTORS if selected.is_dir() else selected
    frame = read_table(path, SELECTION, "selection", hint="make it with `mining select`").to_pandas()
    twice = frame.photo_id[frame.photo_id.duplicated()]
    if len(twice):  # the audit counts images: a photo listed twice would be counted as two checked
        raise UserError(f"{path}: photo {twice.iloc[0]} is listed more than once ({len(twice)} repeated rows); "
                        "a selection lists each photo once: make it again with `mining select`")
    return frame.sort_values("rank", kind="stable").reset_index(drop=True)


def run_draw(*, selected: Path, out: Path, options: AuditOptions) -> dict[str, Any]:
    """AUDIT/audit_queue.parquet + AUDIT/plan.json (see the module docstring). `selected`: `mining
    select`'s folder (or its distractors.parquet)."""
    if not 0 < options.max_leak_rate < 1 or not 0 < options.confidence < 1:
        raise UserError("--max-leak-rate and --confidence must be between 0 and 1 (exclusive)")
    frame = _selection(selected)
    if frame.empty:
        raise UserError(f"{selected}: the selection is empty; nothing to audit")
    design = leakbound.plan(len(frame), options.max_leak_rate, options.confidence)
    positions = leakbound.draw(len(frame), design["strata"], design["sample"], options.seed)
    rows = []
    for h, pos in enumerate(positions):
        weight = design["strata"][h] / design["sample"][h]
        for p in pos:
            lm = frame.closest_landmark[p] if "closest_landmark" in frame else None
            rows.append({"landmark": str(lm) if isinstance(lm, str) and lm else "audit",
                         "photo_id": int(frame.photo_id[p]), "set_rank": int(frame["rank"][p]),
                         "score": float(frame.score[p]) if "score" in frame else None,
                         "stratum": h, "weight": float(weight)})
    order = np.random.default_rng(options.seed + 1).permutation(len(rows))  # reviewers see no stratum order
    rows = [rows[i] for i in order]
    for i, r in enumerate(rows):
        r["rank"] = i + 1
    sampled_ids = [[int(frame.photo_id[p]) for p in pos] for pos in positions]
    label = answers.Label("audit", sample_digest(sampled_ids), answers.stated_fingerprint(selected if selected.is_dir() else selected.parent),
                          answers.ids_digest(frame.photo_id))
    schema = pa.schema([("landmark", pa.string()), ("photo_id", pa.int64()), ("rank", pa.int32()),
                        ("set_rank", pa.int64()), ("score", pa.float64()), ("stratum", pa.int32()),
                        ("weight", pa.float64())], metadata=label.metadata())
    atomic.write_parquet(out / AUDIT_QUEUE, pa.Table.from_pylist(rows, schema=schema))
    result = {**design, "max_leak_rate": options.max_leak_rate, "confidence": options.confidence, "seed": options.seed,
              "selection_digest": label.selection, "sample_digest": label.digest, "bands": list(leakbound.STRATA),
              "sampled_ids": sampled_ids}
    atomic.write_json(out / AUDIT_PLAN, result)
    return result


def near_duplicates_of(leaks: set[int], neardup: Path | None, in_set: set[int]) -> list[int]:
    """Photos of the set in the same near-duplicate group as a leak (not the leaks themselves)."""
    if neardup is None or not leaks:
        return []
    table = read_table(neardup, ("photo_id", "group"), "near-duplicate table", hint="made by `mining neardup`")
    ids = table.column("photo_id").to_numpy().astype(np.int64)
    group = table.column("group").to_numpy().astype(np.int64)
    hit = np.isin(group, group[np.isin(ids, list(leaks))])
    return sorted(int(i) for i in ids[hit] if int(i) in in_set and int(i) not in leaks)


def run_estimate(*, selected: Path, decisions: Path, audit: Path, out: Path,
                 near_duplicates: Path | None = None) -> dict[str, Any]:
    """AUDIT/audit.json + AUDIT/distractors.parquet/.txt (see the module docstring). `selected`: the
    selection the sample was drawn from; `decisions`: the audit review's decisions.parquet;
    `audit`: the draw's AUDIT folder (plan.json), whose target and confidence are the estimate's,
    whatever the manifest says now; `near_duplicates`: NEARDUP/neardup.parquet (near-copies of a
    found leak leave the set too)."""
    plan = read_json(audit / AUDIT_PLAN, "audit plan", hint="make it with `mining audit draw`")
    source = selected / DISTRACTORS if selected.is_dir() else selected
    if (Path(out) / DISTRACTORS).resolve() == source.resolve():
        raise UserError(f"{out}: holds the selection the audit reads ({source}); writing the audited set there would "
                        "replace it: give --out another folder (the audit folder)")
    frame = _selection(selected)
    if answers.ids_digest(frame.photo_id) != plan["selection_digest"]:
        raise UserError(f"{selected}: not the selection the audit sample was drawn from; run `mining audit draw` again")
    sampled = [list(map(int, ids)) for ids in plan["sampled_ids"]]
    df, _ = load_decisions(decisions, kind="audit", digest=sample_digest(sampled))
    answered = set(df.photo_id.tolist())
    in_sample = {p for ids in sampled for p in ids}
    twice, outside = df.photo_id[df.photo_id.duplicated()].tolist(), sorted(answered - in_sample)
    if twice or outside:  # an export answers each sampled photo once: this file was edited or joined
        what = (f"{len(outside)} photo(s) outside the audit's sample (e.g. {outside[0]})" if outside else
                f"photo {twice[0]} more than once")
        raise UserError(f"{decisions}: answers {what}, which no export of this audit's database does; "
                        f"export it again: mining review export --db AUDIT/{AUDIT_DB}")
    open_ = [p for ids in sampled for p in ids if p not in answered]
    if open_:
        raise UserError(f"{decisions}: {len(open_)} of {sum(map(len, sampled))} audited photos have no answer yet "
                        f"(e.g. {open_[0]}); finish the audit review and export again")
    leaks_h, found = leakbound.count_answers(sampled, df)
    result = leakbound.estimate(plan["strata"], [len(ids) for ids in sampled], leaks_h, plan["confidence"])
    in_set = set(frame.photo_id.astype(np.int64).tolist())
    dups = near_duplicates_of(set(found), near_duplicates, in_set)
    kept = frame[~frame.photo_id.isin(set(found) | set(dups))].reset_index(drop=True)
    result.update({
        "max_leak_rate": plan["max_leak_rate"], "seed": plan["seed"], "bands": plan["bands"],
        "selection_digest": plan["selection_digest"], "sample_digest": sample_digest(sampled),
        "strata": [{"size": s, "sampled": len(ids), "leaks": x}
                   for s, ids, x in zip(plan["strata"], sampled, leaks_h)],
        "leaks_found": found, "near_duplicates_removed": dups,
        "removed": len(found) + len(dups), "released_set_size": int(len(kept)),
        "released_digest": answers.ids_digest(kept.photo_id),
    })
    # the plan and the answers the counts come from, beside audit.json (release checks the counts against them)
    evidence = {AUDIT_PLAN: audit / AUDIT_PLAN, DECISIONS: Path(decisions)}
    result["evidence_sha256"] = {name: file_sha256(src) for name, src in evidence.items()}
    copies = [name for name, src in evidence.items() if src.resolve() != (Path(out) / name).resolve()]
    result["released_upper"] = leakbound.released_upper(result)
    result["passes"] = result["released_upper"] <= plan["max_leak_rate"]
    names = [DISTRACTORS, *([DISTRACTORS_TXT] if "path" in kept else []), *copies, AUDIT]
    with atomic.files_together(out, names) as tmp:  # a failure leaves the old outputs; audit.json commits
        for name in copies:
            shutil.copyfile(evidence[name], tmp[name])
        pq.write_table(pa.Table.from_pandas(kept, preserve_index=False), tmp[DISTRACTORS])
        if "path" in kept:
            tmp[DISTRACTORS_TXT].write_text("".join(p + "\n" for p in kept.path), encoding="utf-8")
        tmp[AUDIT].write_text(atomic.json_text(result), encoding="utf-8")
    return result
