"""The report's first screen: its title, the result (mined − random mAP per benchmark, method and
setup, with the bootstrap interval and p) and where the run came from (provenance)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from mining.files.checksums import file_sha256
from mining.files.names import CASCADE_CHECK, EVALUATION, STATS
from mining.publishing.text import fmt_interval, fmt_p
from mining.publishing.version import code_version
from mining.publishing.result import mined_minus_random, per_benchmark, row_label, sentences
from mining.stages.report.common import NA, Inputs, esc, read_json, run_manifest, table


def run_name(inp: Inputs) -> str | None:
    m = run_manifest(inp)
    if m is not None and m.get("name"):
        return str(m["name"])
    return inp.run.name if inp.run else None


def title(inp: Inputs) -> str:
    """'distractor-mining: <run> (<benchmark names>)': what a browser tab and a mail should say."""
    names = list(per_benchmark(read_json(inp.evaluation)))
    if not names:
        names = [n for n, _ in inp.ground_truths]
    run = run_name(inp)
    what = f"run {run}" if run else "run report"
    return f"distractor-mining {what}" + (f": distractors for {', '.join(names)}" if names else "")


def _rows(name: str, rep: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for m in rep.get("methods", []):
        for s in rep.get("setups", []):
            d = mined_minus_random(rep, m, s)
            if not d:
                continue
            rows.append([name, row_label(rep, m), s, f"{100 * d['diff']:+.2f}", fmt_interval(d["ci"]), fmt_p(d.get("p_not_lower"))])
    return rows


def headline(inp: Inputs) -> str:
    """The result first: mined − random mAP per benchmark, method and setup, and a sentence each."""
    benches = per_benchmark(read_json(inp.evaluation))
    if not benches:
        return NA
    said = [" ".join(sentences(n, r)) for n, r in benches.items()]
    rows = [row for n, r in benches.items() for row in _rows(n, r)]
    level = next((r["bootstrap"]["level"] for r in benches.values() if r.get("bootstrap")), 0.95)
    head = ["benchmark", "method", "setup", "mined − random (mAP points)", f"{100 * level:g} % interval", "p"]
    lines = "".join(f'<p class="lead">{esc(s)}</p>' for s in said if s)
    note = ("<p>Negative = the mined set makes retrieval harder than a random one of the same size; "
            "the interval is a paired bootstrap over queries, p the share of resamples where mined is not lower.</p>")
    body = table(rows, head) + note if rows else f'<p class="na">no bootstrap intervals in {EVALUATION}</p>'
    return lines + body + cascade_note(inp)


def cascade_note(inp: Inputs) -> str:
    """What each cascaded method described, and what its check measured (docs/cascade.md)."""
    described = (read_json(inp.evaluation) or {}).get("cascade") or {}
    check = ((read_json(inp.cascade / CASCADE_CHECK) if inp.cascade else None) or {}).get("methods") or {}
    out = []
    for m, c in described.items():
        text = (f"{m} (cascade) described {c['described']:,} of {c['of']:,} candidates: the shortlist of the cheaper "
                f"methods and {c['check']:,} drawn at random to check it.")
        if m in check:
            k = check[m]
            text += (f" Off the shortlist lies an estimated {100 * k['missed']:.2f} % of its score (at most "
                     f"{100 * k['missed_upper']:.2f} %); {k['escaped']} of {k['described']} check candidates outrank "
                     "a positive.")
        out.append(f"<p>{esc(text)}</p>")
    return "".join(out)


def provenance(inp: Inputs) -> str:
    """When, with which code and manifest, from which inputs (their fingerprints where cheap)."""
    cv = code_version()
    rows: list[list[Any]] = [["report built", dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")]]
    if inp.evaluation:
        when = dt.datetime.fromtimestamp(inp.evaluation.stat().st_mtime, dt.timezone.utc)
        rows.append(["evaluation written", when.strftime("%Y-%m-%d %H:%M UTC")])
    rows.append(["report built by", cv["package"]])
    rows.append(["commit", (cv["commit"] or "unknown (not a git checkout)")
                 + (" (with local changes)" if cv.get("local_changes") == "yes" else "")])
    rows.append(["requirements.lock sha256", f"{cv.get('lock_sha256') or 'none'} (installed: {cv.get('environment')})"])
    rows.append(["SIMD level (pinned)", cv.get("simd")])
    rows.append(["CPU", cv.get("cpu")])
    if inp.manifest and inp.manifest.is_file():
        rows.append([f"manifest {inp.manifest.name} sha256", file_sha256(inp.manifest)])
    meta = read_json(inp.metadata / STATS) if inp.metadata else None
    fp = (meta or {}).get("fingerprint") or {}
    for i in fp.get("inputs") or []:
        rows.append([f"metadata input {Path(str(i.get('path', '?'))).name}", f"{i.get('size', '?')} bytes"
                     + (f", sha256 {i['sha256']}" if i.get("sha256") else "")])
    if fp.get("hash"):
        rows.append(["photo-hash input", fp["hash"] if isinstance(fp["hash"], str) else str(fp["hash"])])
    if meta:
        rows.append(["metadata rows read", meta.get("rows_in", "?")])
    for name, r in per_benchmark(read_json(inp.evaluation)).items():
        lm = r.get("landmarks") or {}
        if lm.get("fingerprint"):
            rows.append([f"ground truth {name} fingerprint", f"{lm['fingerprint']} ({lm.get('queries')} queries, "
                                                          f"{lm.get('database')} database images)"])
    sel = read_json(inp.selected / STATS) if inp.selected else None
    if sel and sel.get("landmarks_fingerprint"):
        rows.append(["selection's landmarks fingerprint", sel["landmarks_fingerprint"]])
    return table(rows, ["", "value"])
