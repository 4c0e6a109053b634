"""The audit's statistics (shared: the audit stage computes them, release and the report read them).

A seeded random sample of the final selection, stratified by rank (the hardest images, at the
top, form the small first strata and are sampled at a higher rate than the rest), is checked
by reviewers. From their answers:

- the estimated share of landmark images in the whole set, p̂ = Σ_h W_h x_h / n_h (W_h = N_h / N:
  each stratum's share of the set, so the estimate is for the set, not for the sample);
- an exact one-sided upper bound at `confidence`:
  * one stratum (an unstratified sample): Clopper–Pearson, `beta.ppf(c, x + 1, n - x)`;
  * several strata: Korn & Graubard (1998)'s Clopper–Pearson bound on the effective sample size,
    n_eff = p̂(1 − p̂) / v̂ (v̂ the stratified variance, Σ W_h² p̂_h(1 − p̂_h)/(n_h − 1), no finite
    population correction: conservative), times their degrees-of-freedom factor
    (t_{n−1} / t_{n−H})², at most n; x_eff = p̂ n_eff; bound = beta.ppf(c, x_eff + 1, n_eff − x_eff).
    When p̂ = 0 (or v̂ = 0) n_eff is Kish's effective size of the weights, (Σw)² / Σw² = N² / Σ N_h²/n_h,
    not n: the unequal weights cost sample size even when nothing is found;
  * every stratum checked in full (a census): the share is counted, not estimated: bound = p̂.
- the sample size from the target: the smallest sample whose bound with no leak found is at most
  `max_leak_rate` (0 in 299 bounds the rate below 1 % at 95 %), grown until Kish's n_eff reaches it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from mining.files.answers import ids_digest, queue_digest
from mining.files.checksums import file_sha256
from mining.files.names import AUDIT, AUDIT_PLAN, DECISIONS, DISTRACTORS
from mining.files.tables import load_decisions, read_json
from mining.errors import UserError

# Rank bands of the selection (shares of N, top first): the hardest 5 %, then to 20 %, 50 %, all.
STRATA = (0.05, 0.20, 0.50, 1.0)


def clopper_pearson_upper(x: float, n: float, confidence: float) -> float:
    """One-sided exact upper bound on a binomial proportion (x may be fractional: Korn–Graubard)."""
    from scipy.stats import beta

    if n <= 0:
        return 1.0
    if x >= n:
        return 1.0
    return float(beta.ppf(confidence, x + 1, n - x))


def zero_leak_size(max_leak_rate: float, confidence: float) -> int:
    """The smallest n whose Clopper–Pearson bound with 0 leaks found is at most max_leak_rate."""
    if not 0 < max_leak_rate < 1 or not 0 < confidence < 1:
        raise ValueError("max_leak_rate and confidence must be in (0, 1)")
    n = max(1, math.ceil(math.log(1 - confidence) / math.log1p(-max_leak_rate)) - 1)  # log1p: rates below 1e-16
    if n > 2**53:  # beyond any set (and float precision): every image will be checked
        return n
    while clopper_pearson_upper(0, n, confidence) > max_leak_rate:
        n += 1
    return n


def strata_sizes(n_set: int, bands: tuple[float, ...] = STRATA) -> list[int]:
    """Sizes of the rank strata of a set of n_set images (top first; empty strata left out)."""
    edges = [0] + [min(n_set, math.ceil(b * n_set)) for b in bands]
    edges[-1] = n_set
    return [e - s for s, e in zip(edges, edges[1:]) if e > s]


def allocate(sizes: list[int], n: int) -> list[int]:
    """n sampled images over strata ∝ sqrt(N_h) (the hard strata above their share), each at least 2
    (a variance) and at most N_h; largest remainders, ties to the harder stratum."""
    sizes = [int(s) for s in sizes]
    if n >= sum(sizes):
        return sizes
    alloc = [min(s, 2) for s in sizes]
    while sum(alloc) < n:
        room = [h for h, s in enumerate(sizes) if alloc[h] < s]
        left = n - sum(alloc)
        root = {h: math.sqrt(sizes[h]) for h in room}
        total = sum(root.values())
        want = {h: left * root[h] / total for h in room}
        add = {h: min(sizes[h] - alloc[h], int(want[h])) for h in room}
        if sum(add.values()) == 0:  # hand out the remainder one by one
            for h in sorted(room, key=lambda h: (-(want[h] - int(want[h])), h))[:left]:
                add[h] = 1
        for h, a in add.items():
            alloc[h] += a
    return alloc


def kish_neff(sizes: list[int], alloc: list[int]) -> float:
    """Kish's effective sample size of the design's weights N_h / n_h: N² / Σ N_h² / n_h."""
    n_set = sum(sizes)
    return n_set**2 / sum(s * s / a for s, a in zip(sizes, alloc))


def plan(n_set: int, max_leak_rate: float, confidence: float) -> dict[str, Any]:
    """Strata and per-stratum sample sizes such that 0 leaks found bounds the rate ≤ max_leak_rate."""
    sizes = strata_sizes(n_set)
    need = zero_leak_size(max_leak_rate, confidence)
    n = min(need, n_set)
    alloc = allocate(sizes, n)
    while alloc != sizes and (len(sizes) > 1 and kish_neff(sizes, alloc) < need):
        n += max(1, n // 100)
        alloc = allocate(sizes, n)
    return {"set_size": n_set, "strata": sizes, "sample": alloc, "zero_leak_size": need,
            "census": alloc == sizes, "kish_neff": kish_neff(sizes, alloc) if n_set else 0.0}


def draw(n_set: int, sizes: list[int], alloc: list[int], seed: int) -> list[np.ndarray]:
    """Per stratum, the sampled positions (0-based rank positions in the set, sorted)."""
    rng = np.random.default_rng(seed)
    out, start = [], 0
    for s, a in zip(sizes, alloc):
        out.append(np.sort(start + rng.choice(s, size=a, replace=False)))
        start += s
    assert start == n_set
    return out


def estimate(sizes: list[int], sampled: list[int], leaks: list[int], confidence: float) -> dict[str, Any]:
    """The share of landmark images in the set and its one-sided upper bound (see the module docstring)."""
    from scipy.stats import t

    sizes_a, n_a, x_a = (np.asarray(v, np.float64) for v in (sizes, sampled, leaks))
    if np.any(n_a < 1) or np.any(x_a > n_a) or np.any(n_a > sizes_a):
        raise ValueError("each stratum needs 1 ≤ sampled ≤ its size and leaks ≤ sampled")
    n_set, n = float(sizes_a.sum()), float(n_a.sum())
    w = sizes_a / n_set
    p_h = x_a / n_a
    p = float((w * p_h).sum())
    out: dict[str, Any] = {"set_size": int(n_set), "sampled": int(n), "leaks": int(x_a.sum()),
                           "estimate": p, "confidence": confidence}
    if np.all(n_a == sizes_a):
        return {**out, "upper": p, "method": "census", "n_eff": n}
    if len(sizes) == 1:
        return {**out, "upper": clopper_pearson_upper(float(x_a[0]), n, confidence),
                "method": "clopper-pearson", "n_eff": n}
    var = float((w**2 * p_h * (1 - p_h) / np.maximum(n_a - 1, 1)).sum())
    kish = n_set**2 / float((sizes_a**2 / n_a).sum())
    if p > 0 and var > 0:
        df = n - len(sizes)
        low = t.ppf(confidence, df) if df >= 1 else 0.0
        factor = (t.ppf(confidence, n - 1) / low) ** 2 if low else 1.0  # 0 at confidence 0.5: both quantiles 0
        n_eff = min(n, p * (1 - p) / var * factor)
    else:
        n_eff = kish
    return {**out, "upper": clopper_pearson_upper(p * n_eff, n_eff, confidence),
            "method": "korn-graubard", "n_eff": float(n_eff)}


def released_upper(audit: dict[str, Any]) -> float:
    """The bound for the released set: the audited set's D ≤ U·N leaks less the x found (removed with
    their near-duplicates): (U·N − x) / (N − removed), with the same confidence; 0 after a census."""
    left = audit["set_size"] - audit["removed"]
    return max(0.0, audit["upper"] * audit["set_size"] - audit["leaks"]) / left if left > 0 else 0.0


def recompute(audit: dict[str, Any], photo_ids: Any, max_leak_rate: float, confidence: float) -> dict[str, Any]:
    """audit.json (`mining audit estimate`) as the release's evidence: its bound derived again from
    its counts (per stratum: size, sampled, leaks; the leaks found and the near-duplicates removed)
    at `confidence`, and compared with `max_leak_rate`, both the release's own; what the file says
    of its own bound, target, confidence or `passes` is not read. `photo_ids`: the set to release,
    which must be the set the audit left (its digest and size). UserError when the counts do not
    add up."""
    try:
        strata = [(_count(h["size"]), _count(h["sampled"]), _count(h["leaks"])) for h in audit["strata"]]
        found, dups = [_count(p) for p in audit["leaks_found"]], [_count(p) for p in audit["near_duplicates_removed"]]
        digest = audit["released_digest"]
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"the audit file is not `mining audit estimate`'s {AUDIT} (no usable {exc}); "
                        "run `mining audit estimate` again") from None
    if digest != ids_digest(photo_ids):
        raise UserError(f"the selection is not the set the audit left (AUDIT/{DISTRACTORS} of the same "
                        "`mining audit estimate`); release that one")
    sizes, sampled, leaks = (list(v) for v in zip(*strata)) if strata else ([], [], [])
    ids = set(np.asarray(photo_ids, np.int64).tolist())
    removed = set(found) | set(dups)
    problems = [what for what, bad in (
        ("strata vs the design for the set's size, target and confidence of the draw", not _drawn(audit, sizes, sampled)),
        ("leaks per stratum vs leaks found", sum(leaks) != len(set(found))),
        ("leaks vs the strata's leaks", audit.get("leaks", sum(leaks)) != sum(leaks)),
        ("removed photos listed twice", len(removed) != len(found) + len(dups)),
        ("set size less removed vs the set", sum(sizes) - len(removed) != len(ids)),
        ("removed photos still in the set", bool(removed & ids))) if bad]
    try:
        result = estimate(sizes, sampled, leaks, confidence) if strata else None
    except ValueError:
        result = None
    if result is None or problems:
        raise UserError(f"the audit's counts do not add up ({'; '.join(problems) or 'strata'}): {AUDIT} was edited "
                        "or is not the one of this set; run `mining audit estimate` again")
    out = {**audit, **result, "removed": len(removed), "released_set_size": len(ids), "max_leak_rate": max_leak_rate}
    out["released_upper"] = released_upper(out)
    out["passes"] = out["released_upper"] <= max_leak_rate
    return out


def _count(value: Any) -> int:
    """A count or photo id of audit.json: a JSON integer, not negative (no float, text or boolean)."""
    if type(value) is not int or value < 0:
        raise ValueError(f"count {value!r}: a whole number >= 0 is expected")
    return value


def _drawn(audit: dict[str, Any], sizes: list[int], sampled: list[int]) -> bool:
    """The strata and their sample sizes are the ones `mining audit draw` plans for a set of that size
    at the target and confidence the audit states for its draw (`plan`): a sample size is not evidence."""
    rate, confidence = audit.get("max_leak_rate"), audit.get("confidence")
    if not all(isinstance(v, float) and 0 < v < 1 for v in (rate, confidence)) or not sizes:
        return False
    design = plan(sum(sizes), rate, confidence)
    return design["strata"] == sizes and design["sample"] == sampled


# what an audit's counts come from, kept beside its audit.json (`mining audit estimate` puts them there)
EVIDENCE = {AUDIT_PLAN: "plan (mining audit draw)", DECISIONS: "answers (mining review export)"}


def count_answers(sampled_ids: list[list[int]], decisions: Any) -> tuple[list[int], list[int]]:
    """(leaks per stratum, the photos found to show a landmark) from the audit's answers: `landmark`
    and `unclear` both count as leaks (conservatively)."""
    leaky = set(decisions.photo_id[decisions.decision != "not_landmark"].tolist())
    return [sum(p in leaky for p in ids) for ids in sampled_ids], sorted({p for ids in sampled_ids for p in ids
                                                                          if p in leaky})


def answers_agree(audit: dict[str, Any], folder: Path) -> None:
    """audit.json tied to the audit's own plan and answers beside it: each file's sha256 is the one
    audit.json records, and the counts it states are the ones the answers give (per stratum, the
    leaks found, the total). UserError naming the file or the field: forging a release would need
    forging the answers, which the card's digests expose."""
    where = folder / AUDIT
    digests = audit.get("evidence_sha256")
    if not isinstance(digests, dict) or set(digests) != set(EVIDENCE):
        raise UserError(f"{where}: names no plan and answers (evidence_sha256): it was edited, or made before audits "
                        "recorded them; run `mining audit estimate` again")
    for name, what in EVIDENCE.items():
        path = folder / name
        if path.is_symlink() or not path.is_file():
            raise UserError(f"{path}: the audit's {what} must be beside its {AUDIT} (`mining audit estimate` "
                            "puts it there)")
        if file_sha256(path) != digests[name]:
            raise UserError(f"{path}: is not the {what} {AUDIT} was estimated from (its sha256 differs); run "
                            "`mining audit estimate` again")
    plan = read_json(folder / AUDIT_PLAN, "audit plan")
    try:
        sampled = [[int(p) for p in ids] for ids in plan["sampled_ids"]]
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{folder / AUDIT_PLAN}: not `mining audit draw`'s plan (no sampled_ids)") from None
    decisions, _ = load_decisions(folder / DECISIONS, kind="audit",
                                  digest=queue_digest([p for ids in sampled for p in ids]))
    leaks_h, found = count_answers(sampled, decisions)
    strata = audit.get("strata") or []
    stated = [("leaks", audit.get("leaks"), sum(leaks_h)), ("leaks_found", audit.get("leaks_found"), found),
              ("strata (sampled)", [h.get("sampled") for h in strata], [len(ids) for ids in sampled]),
              ("strata (leaks)", [h.get("leaks") for h in strata], leaks_h),
              ("selection_digest", audit.get("selection_digest"), plan.get("selection_digest"))]
    for field, says, truth in stated:
        if says != truth:
            raise UserError(f"{where}: {field} says {str(says)[:80]}, but the audit's plan and answers give "
                            f"{str(truth)[:80]}: {AUDIT} was edited; run `mining audit estimate` again")


def release_gate(audit: dict[str, Any] | None, allow_over_target: bool, photo_ids: Any,
                 max_leak_rate: float, confidence: float, folder: Path | None = None) -> dict[str, Any] | None:
    """`mining release --audit`: the audit recomputed (`recompute`) and, given its `folder`, its counts
    checked against its answers (`answers_agree`); refuse a set that is not the audited one, or whose
    recomputed bound is above the release's target unless told otherwise."""
    if audit is None:
        return None
    checked = recompute(audit, photo_ids, max_leak_rate, confidence)
    if folder is not None:
        answers_agree(audit, folder)
    if not checked["passes"] and not allow_over_target:
        drawn = audit.get("max_leak_rate")
        note = (f" (the audit was drawn for {100 * drawn:.2f} %: give release that target with "
                "--audit-max-leak-rate or the manifest's audit section, if it is the one you mean)"
                if isinstance(drawn, (int, float)) and drawn != max_leak_rate else "")
        raise UserError(f"the audit bounds the released set's leak rate at {100 * checked['released_upper']:.2f} % "
                        f"({confidence:.0%} one-sided, {checked['method']}, from its counts), above the target "
                        f"{100 * max_leak_rate:.2f} %{note}: review more, or release anyway with "
                        "--audit-over-target allow (manifest audit: {over_target: allow}); the card states the bound "
                        "either way")
    return checked


def sentence(audit: dict[str, Any]) -> str:
    """The audited leak rate in words (the dataset card and the report say the same)."""
    how = {"census": "every image of the set was checked: counted, not estimated",
           "clopper-pearson": "exact Clopper–Pearson",
           "korn-graubard": "stratified sample; Clopper–Pearson on the Korn–Graubard effective sample "
                            f"size {audit['n_eff']:.0f}"}[audit["method"]]
    who = (f"Reviewers checked all {audit['set_size']} selected images and" if audit["method"] == "census" else
           f"A reviewed random sample of {audit['sampled']} of the {audit['set_size']} selected images")
    return (f"{who} found {audit['leaks']} showing a landmark: estimated leak rate {100 * audit['estimate']:.2f} % of the set as "
            f"selected, {audit['confidence']:.0%} one-sided upper bound {100 * audit['upper']:.2f} % ({how}). The "
            f"{len(audit['leaks_found'])} found and {len(audit['near_duplicates_removed'])} near-duplicate(s) of "
            f"them were removed, which leaves a leak rate of at most **{100 * audit['released_upper']:.2f} %** in "
            f"the released set ({audit['confidence']:.0%} one-sided; target {100 * audit['max_leak_rate']:.2f} %: "
            f"{'met' if audit['released_upper'] <= audit['max_leak_rate'] else 'NOT met'}).")
