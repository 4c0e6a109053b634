"""`mining evaluate --kit`: the run's mAP table from its evaluation kit alone, or a user's own
queries evaluated against the kit (the kit's format: `mining.kit`, docs/formats.md).

What is reproduced: for every method and setup, the mAP and mP@1/5/10 with no distractors and
with the mined N (the selected set, in rank order), and the mined curve (its smaller prefixes),
exactly as `mining evaluate` computed them: the same stores' bytes, the same similarity code
(`mining.retrieval`, `mining.retrieval.descriptors`) and the same exact counting (`experiment.reduce_method`,
`evaluate_setups`). Random N and all candidates need the whole pool, which a kit does not hold.
Also every `<method>+SP` row (from the run's verified similarities the kit keeps, `similarities+SP/`,
checked against the plain ones: equal but where a verified match lifted them) and every +αQE/+DBA
row (computed again from the kit's global descriptors, `expansion.rows_of`). A row the kit cannot
compute is named in `reproduced.not_reproduced`, never silently left out.

A user's queries: a descriptor store (`mining describe --set queries --model KIT/methods/M/distractors`:
the kit's model and settings, which are checked) or, for a global method, a `.npy` (queries, dim)
with one row per query of the gnd in its qimlist order (kept as float16, as a store keeps them).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mining.files import atomic
from mining.datasets.benchmarks import as_list, load_all
from mining.files.names import EVALUATION, EVALUATION_MD
from mining.retrieval.descriptors import GLOBAL, iter_similarities, open_store, write_global_shard, write_store_info
from mining.errors import UserError
from mining.stages.evaluate import expansion
from mining.stages.evaluate.experiment import evaluate_setups, setup_base
from mining.stages.evaluate.histograms import Ranking, reduce_method
from mining.stages.evaluate.protocols.setups import KAPPAS
from mining.kit import open_kit
from mining.files.npyfile import npy_file
from mining.methods import get_method
from mining.publishing.result import row_label
from mining.publishing.text import pct
from mining.retrieval.methodstores import LandmarkSims
from mining.retrieval.reranking import LIFT

TOLERANCE = 1e-6
UNIT_TOLERANCE = 1e-2  # a float16 row's length is 1 within ~1e-3; a row that is not a descriptor is far off
SIMS_AGREE = 1e-4  # float32 rounding of a cosine is ~1e-7; a wrong descriptor is off by far more
_METRICS = ("mAP", *(f"mP@{k}" for k in KAPPAS))


def run_kit(*, kit: Path, landmarks: Sequence[str], out: Path | None = None, queries: Path | None = None,
            method: str | None = None) -> dict[str, Any]:
    """`mining evaluate --kit`: evaluate from the kit; returns the report (also OUT/evaluation.json
    and .md when `out`). `kit`: the release's evaluation kit (RELEASE/kit); `landmarks`:
    [NAME=]GND, the landmark dataset(s) the kit was made for; `queries`: a user's own queries (a
    descriptor store or a .npy, global methods), described with the kit's `method` (default:
    its only global one)."""
    opened = open_kit(kit, method_of=get_method)
    run = opened.evaluation()
    benchmarks = as_list(landmarks)
    datasets = load_all(benchmarks)
    pairs = _benchmarks_of(opened, run, benchmarks, datasets)
    if queries is not None and len(pairs) != 1:
        raise UserError("--queries: give the one benchmark (--landmarks NAME=GND) whose database they are ranked in")
    mined = opened.distractors()["photo_id"].to_numpy(np.int64)
    reports = {bench: _bench_report(opened, bench, dataset, ev, mined, queries, method)
               for bench, dataset, ev in pairs}
    report = reports[None] if opened.benchmarks is None else {"per_benchmark": reports}
    report["kit"] = str(kit)
    if out is not None:
        atomic.write_json(Path(out) / EVALUATION, report)
        atomic.write_text(Path(out) / EVALUATION_MD, markdown(report))
    return report


def _benchmarks_of(kit: Any, run: dict[str, Any], benchmarks: Sequence[Any],
                   datasets: Sequence[Any]) -> list[tuple[str | None, Any, dict[str, Any]]]:
    """(benchmark name or None, its dataset, the run's evaluation of it) for every --landmarks
    given, checked against the kit's benchmarks."""
    if kit.benchmarks is None:
        if len(benchmarks) != 1:
            raise UserError(f"the kit is for one benchmark; give one --landmarks, not {len(benchmarks)}")
        return [(None, datasets[0], run)]
    names = [b.name for b in benchmarks]
    unknown = [n for n in names if n not in kit.benchmarks]
    if unknown:
        raise UserError(f"--landmarks {unknown[0]}=...: the kit's benchmarks are {', '.join(kit.benchmarks)} "
                        "(give them as NAME=GND)")
    per_run = run.get("per_benchmark")
    return [(b.name, ds, per_run[b.name]) for b, ds in zip(benchmarks, datasets)]


def _bench_report(kit: Any, bench: str | None, dataset: Any, ev: dict[str, Any], mined: np.ndarray,
                  queries: Path | None, method: str | None) -> dict[str, Any]:
    """One benchmark's table: the run's reproduced (and compared), or a user's queries'."""
    n = min(int(ev["n"]), mined.size)
    first = ev["methods"][0] if ev.get("methods") else None
    sizes = [int(k) for k in ev["curve"][first][ev["setups"][0]]["sizes"] if int(k) <= n] if first else []
    ranking = Ranking(mined, sorted(set(sizes) | {n}))
    if queries is None:
        fp = ev["landmarks"]["fingerprint"]
        if dataset.fingerprint() != fp:
            raise UserError(f"{dataset.path}: not the landmark dataset this kit was made for (fingerprint "
                            f"{dataset.fingerprint()} ≠ {fp}); with your own queries add --queries")
        stores = [(m, kit.stores(m, bench)) for m in kit.methods]
        sims = {m: kit.similarities(m, bench) for m in kit.methods}
        agree = agreement(stores, sims)  # first: the similarities fit the stores, or one line
        rows = [(row, st) for m, st in stores for row in ([m] + ([m + "+SP"] if kit.spatial_of(m) else []))]
        for m, _ in stores:
            if kit.spatial_of(m):  # the run's verified similarities: checked against the plain ones
                sims[m + "+SP"] = spatial_agreement(m, sims[m], kit.similarities(m, bench, spatial=True),
                                                    kit.spatial_of(m))
        report = _report(dataset, ev, rows, ranking, n, sizes, sims)
        chosen = {"none": [np.zeros(0, np.int64)], "mined": [np.asarray(mined[:n], np.int64)]}
        ex = expansion.Expansion.from_json(ev.get("expansion"))
        report["variants"] = {row: v for m, st in stores for row, v in expansion.rows_of(st, dataset, chosen,
                                                                                         report["setups"], ex).items()}
        report["held_out"] = [m for m in report["methods"] if m in (ev.get("held_out") or ())]
        report["reproduced"] = compare(report, ev)
        report["descriptors_vs_similarities"] = agree
        return report
    with tempfile.TemporaryDirectory(prefix="kit-queries-") as tmp:
        m, store = user_queries(kit, queries, method, dataset, Path(tmp))
        report = _report(dataset, ev, [(m, kit.stores(m, bench, queries=store))], ranking, n, sizes)
    report["queries"] = str(queries)
    return report


def _report(dataset: Any, ev: dict[str, Any], stores: list[tuple[str, Any]], ranking: Ranking, n: int,
            sizes: list[int], sims: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> dict[str, Any]:
    """The table for these methods; `sims`: the run's own similarities (the kit's), else
    computed from the stores' descriptors."""
    setups = list(ev["setups"])
    rep: dict[str, Any] = {"landmarks": {"name": dataset.name, "fingerprint": dataset.fingerprint(),
                                         "queries": len(dataset.qimlist), "database": len(dataset.imlist)},
                           "n": n, "setups": setups, "kappas": list(KAPPAS), "methods": [], "results": {},
                           "curve": {}}
    for name, st in stores:
        if sims is None:
            md = reduce_method(name, dataset, st.landmark_similarities(dataset), st.candidate_similarities(), [ranking])
        else:
            lm, dis = sims[name]
            landmark = LandmarkSims.from_ids(str(st.path), dataset, st.queries.ids(), st.database.ids(), lm)
            md = reduce_method(name, dataset, landmark, [(st.candidates.ids(), dis)], [ranking])
        bases = {s: setup_base(md, dataset.gnd, s) for s in setups}
        none = evaluate_setups(md, bases, None)
        at = {k: evaluate_setups(md, bases, md.above(0, k)) for k in sorted(set(sizes) | {n})}
        rep["methods"].append(name)
        rep["results"][name] = {s: {"none": none[s], "mined": at[n][s]} for s in setups}
        rep["curve"][name] = {s: {"sizes": sizes, "mined": [at[k][s]["mAP"] for k in sizes]} for s in setups}
    return rep


def spatial_agreement(method: str, plain: tuple[np.ndarray, np.ndarray], sp: tuple[np.ndarray, np.ndarray],
                      settings: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """The kit's +SP similarities, when they are the plain ones but where verification lifted
    them (`mining.retrieval.reranking.lifted`: by at least LIFT × min_inliers), else one line."""
    for a, b, what in ((plain[0], sp[0], "landmarks"), (plain[1], sp[1], "distractors")):
        if a.shape != b.shape:
            raise UserError(f"{method}: the kit's +SP similarities ({what}) have shape {b.shape}, not {a.shape}")
        changed = a != b
        lift = (b[changed].astype(np.float64) - a[changed]) if changed.any() else np.zeros(0)
        if lift.size and not float(lift.min()) >= LIFT * settings["min_inliers"] - 1:
            raise UserError(f"{method}: the kit's +SP similarities ({what}) differ from its plain ones by "
                            f"{float(lift.min()):.3g}, less than a verified match's lift; the kit is inconsistent")
    return sp


def agreement(stores: list[tuple[str, Any]], sims: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """Per method, the largest difference between the kit's stored similarities and those its
    descriptors give here (float32 products in another order or on another CPU differ in the
    last bits; a descriptor that does not belong to the similarities differs by far more)."""
    out: dict[str, Any] = {}
    for name, st in stores:
        lm, dis = sims[name]
        got_lm = np.concatenate([b for _, b in iter_similarities(st.queries, st.database)], axis=1) if lm.size else lm
        got_dis = np.concatenate([b for _, b in st.candidate_similarities()], axis=1) if dis.size else dis
        if got_lm.shape != lm.shape or got_dis.shape != dis.shape:
            raise UserError(f"{st.path}: the kit's similarities do not match its descriptors' shapes")
        diff = max(float(np.max(np.abs(a - b), initial=0.0)) for a, b in ((got_lm, lm), (got_dis, dis)))
        if not diff <= SIMS_AGREE:
            raise UserError(f"{st.path}: the kit's descriptors give similarities up to {diff:.3g} away from its "
                            f"stored ones (> {SIMS_AGREE}); the kit is inconsistent")
        out[name] = diff
    return out


def compare(mine: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """Every value of `mine` against the run's: how many, the largest difference, where."""
    if run.get("mined_source", "selected") != "selected":
        return {"values": 0, "max_abs_diff": None, "ok": False,
                "why": f"the run's mined set was {run['mined_source']}, bigger than the selection the kit holds"}
    worst, where, count = 0.0, None, 0
    theirs_variants, mine_variants = run.get("variants") or {}, mine.get("variants") or {}
    rows = [(m, mine["results"][m], run["results"][m], mine["curve"][m], run["curve"][m])
            for m in mine["methods"] if m in run["results"]]
    rows += [(v, mine_variants[v]["results"], theirs_variants[v]["results"], None, None)
             for v in mine_variants if v in theirs_variants]
    for m, ours, theirs, curve_ours, curve_theirs in rows:
        for s in mine["setups"]:
            pairs = [(f"{kind} {key}", ours[s][kind][key], theirs[s][kind][key])
                     for kind in ("none", "mined") for key in _METRICS]
            if curve_ours is not None:
                curve = curve_ours[s]
                pairs += [(f"curve {k}", a, b) for k, a, b in zip(curve["sizes"], curve["mined"], curve_theirs[s]["mined"])]
            for label, a, b in pairs:
                d = abs(float(a) - float(b))
                count += 1
                if d > worst or where is None:
                    worst, where = max(d, worst), f"{m} {s} {label}"
    # rows of the run's table this kit does not compute: named, never silently missing
    absent = [m for m in run.get("methods", []) if m not in mine["methods"]] + [
        v for v in theirs_variants if v not in mine_variants]
    return {"values": count, "max_abs_diff": worst, "worst": where, "ok": bool(count) and worst <= TOLERANCE,
            "not_reproduced": absent}


def user_queries(kit: Any, path: Path, method: str | None, dataset: Any, tmp: Path) -> tuple[str, Any]:
    """(method, query Store) from a user's store folder or .npy, checked against the kit's method."""
    path = Path(path)
    if path.is_dir():
        store = open_store(path, get_method)
        name = store.method
        if method is not None and method != name:
            raise UserError(f"--queries {path} holds {name!r} descriptors, not --method {method!r}")
        ref = kit.store(name, "distractors")
        mine, theirs = store.info.get("params") or {}, ref.info.get("params") or {}
        # every setting of the kit's, as the kit has it (a setting newer than the kit may be added)
        differ = sorted(k for k in theirs if json.dumps(mine.get(k)) != json.dumps(theirs[k]))
        if store.kind != ref.kind or differ:
            what = f"{differ[0]}={mine.get(differ[0])!r} (the kit's: {theirs[differ[0]]!r})" if differ else store.kind
            raise UserError(f"--queries {path}: described with other {name} settings than the kit's: {what}; "
                            f"describe with --model {ref.path}")
        want = (ref.info.get("model") or {}).get("sha256")
        have = (store.info.get("model") or {}).get("sha256")
        if want != have:
            raise UserError(f"--queries {path}: described with another model than the kit's {name} (sha256 {have} ≠ "
                            f"{want}); describe with --model {ref.path}")
        if store.kind == GLOBAL:  # its rows as they will be used
            for shard in store.shard_names():  # each header against its file's size, before numpy allocates
                npy_file(path / "shards" / f"{shard}.npy", f"--queries {path / 'shards' / shard}.npy", "")
            try:
                _, rows = store.load_all(as_stored=True)
            except (OSError, ValueError) as exc:
                raise UserError(f"--queries {path}: its shards are not readable descriptor rows ({exc})") from None
            unit_rows(np.asarray(rows), f"--queries {path}", name)
        return name, store
    if path.suffix != ".npy" or not path.is_file():
        raise UserError(f"--queries {path}: give a descriptor store folder (mining describe) or a .npy file")
    globals_ = [m for m in kit.methods if kit.info["methods"][m]["kind"] == GLOBAL]
    if method is None:
        if len(globals_) != 1:
            raise UserError(f"--queries {path.name}: name its method with --method ({', '.join(globals_)})")
        method = globals_[0]
    if method not in globals_:
        raise UserError(f"--method {method}: a .npy holds global descriptors; the kit's global methods are "
                        f"{', '.join(globals_) or 'none'} (others take a descriptor store)")
    npy_file(path, f"--queries {path}", "")  # its header against the file's size, before numpy allocates
    try:
        x = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UserError(f"--queries {path}: not a readable .npy ({exc})") from None
    ref = kit.store(method, "distractors")
    dim = int(ref.info["dim"])
    if x.ndim != 2 or x.shape != (len(dataset.qimlist), dim) or not np.issubdtype(x.dtype, np.floating):
        raise UserError(f"--queries {path}: need float rows of shape ({len(dataset.qimlist)}, {dim}) (one per query "
                        f"of {dataset.path.name}, in its qimlist order; {method}'s dimension), got {x.dtype} {x.shape}")
    x = unit_rows(x, f"--queries {path}", method)
    write_global_shard(tmp, "00000", list(dataset.qimlist), x)
    write_store_info(tmp, {**ref.info, "set": "queries", "count": int(x.shape[0]), "shards": 1})
    return method, open_store(tmp)


def unit_rows(x: np.ndarray, what: str, method: str) -> np.ndarray:
    """`x` as the kit's stores keep a global method's rows (float16, unit length), checked as it
    will be used: every value finite and every row of length 1 (within `UNIT_TOLERANCE`) before
    and after the float16 cast; a zero row, a row of another length (not the method's
    L2-normalised descriptor: an overflow to inf in float16 when large, a scale the ranking
    never sees when not) or NaN/inf: one line naming the first such row."""
    x64 = np.asarray(x, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.linalg.norm(x64, axis=1) if x64.size else np.ones(len(x64))
        half = x64.astype(np.float16)
        half_norms = np.linalg.norm(half.astype(np.float64), axis=1) if x64.size else norms
    finite = np.isfinite(x64).all(axis=1)
    unit = finite & (np.abs(norms - 1) <= UNIT_TOLERANCE) & (np.abs(half_norms - 1) <= UNIT_TOLERANCE)
    if unit.all():
        return half
    r = int(np.flatnonzero(~unit)[0])
    why = ("has NaN or infinite values" if not finite[r] else "is all zeros" if norms[r] == 0
           else f"has length {norms[r]:.6g}")
    raise UserError(f"{what}: row {r} {why} ({int((~unit).sum())} of {len(x64)} rows are not unit length); the "
                    f"kit's {method} descriptors are L2-normalised rows, kept as float16: give them as the method "
                    "makes them (whitened and normalised, `mining describe --model`)")


def markdown(report: dict[str, Any]) -> str:
    """The kit's table: per method and setup, none and mined N (mAP, mP@K in %)."""
    per = report.get("per_benchmark") or {None: report}
    lines = [f"# Evaluation from the kit {report['kit']}", ""]
    for bench, rep in per.items():
        n = rep["n"]
        lm = rep["landmarks"]
        lines += [f"## {lm['name']} ({lm['queries']} queries, {lm['database']} database images)"
                  + (f", benchmark {bench}" if bench else ""), ""]
        rp = rep.get("reproduced")
        if rp:
            where = f" ({rp['worst']})" if rp.get("worst") and rp["max_abs_diff"] else ""
            why = f"; {rp['why']}" if rp.get("why") else ""
            lines += [(f"Reproduces the run's {EVALUATION}: " if rp["ok"] else "**Does not reproduce** the run's "
                       f"{EVALUATION}: ") + f"{rp['values']} values, largest difference {rp['max_abs_diff']}"
                      + where + why + ".", ""]
            if rp.get("not_reproduced"):
                lines += [f"Rows of the run's table this kit does not compute: {', '.join(rp['not_reproduced'])}.", ""]
        agree = rep.get("descriptors_vs_similarities")
        if agree:
            lines += ["The kit's descriptors give its stored similarities again (largest difference per method: "
                      + ", ".join(f"{m} {d:.2g}" for m, d in agree.items()) + ").", ""]
        lines += ["| method | setup | distractors | " + " | ".join(_METRICS) + " |", "|" + "---|" * (3 + len(_METRICS))]
        variants = rep.get("variants") or {}
        for m, results in [(m, rep["results"][m]) for m in rep["methods"]] + [(v, x["results"]) for v, x in variants.items()]:
            for s in rep["setups"]:
                for kind, label in (("none", "none"), ("mined", f"mined {n}")):
                    r = results[s][kind]
                    lines.append(f"| {row_label(rep, m)} | {s} | {label} | " + " | ".join(pct(r[k]) for k in _METRICS) + " |")
        lines.append("")
    return "\n".join(lines)
