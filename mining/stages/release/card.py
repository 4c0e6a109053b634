"""The release's dataset card (RELEASE/README.md): what the set is, how it was made (the funnel,
where the images came from), its licences, faces, hardness, checksums, how to cite and evaluate.
Every value that comes from metadata is Markdown-escaped (`mining.publishing.text.md_text`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mining.files.names import DISTRACTORS_TXT, EVALUATION, IMAGES_SUMMARY
from mining.publishing.leakbound import sentence
from mining.publishing.text import md_text, pct as _pct
from mining.files.tables import read_json
from mining.kit.write import model_lines
from mining.stages.release.plan import REBUILD


def _cell(v: Any) -> str:
    return md_text(v) if isinstance(v, str) else md_text(str(v))


def sources(frame: Any, released: list[int], images: Path) -> dict:
    """Where the released images came from (per source), and what the download found alive
    (images/summary.json: per source asked/served/failed; alive full-res, low-res only, gone)."""
    names = frame.source.astype(object).where(frame.source.notna(), "unknown") if "source" in frame else None
    per: dict[str, int] = {}
    for i in released:
        name = str(names.iloc[i]) if names is not None else "unknown"
        per[name] = per.get(name, 0) + 1
    path = images / IMAGES_SUMMARY
    summary = read_json(path, "download summary") if path.is_file() else None
    keys = ("photos", "alive_full_res", "alive_low_res_only", "gone_everywhere", "sources")
    return {"released": dict(sorted(per.items())),
            "download": {k: summary[k] for k in keys if k in summary} if summary else None}


def _sources_md(sources: dict | None) -> list[str]:
    """The card's "Where the images came from": what was still alive, per source."""
    if not sources:
        return []
    out = ["", "## Where the images came from", ""]
    dl = sources.get("download") or {}
    if "alive_full_res" in dl:
        out.append(f"Of {dl.get('photos', '–')} candidate photos, {dl['alive_full_res']} were still available at full "
                   f"resolution, {dl.get('alive_low_res_only', 0)} only at low resolution, and "
                   f"{dl.get('gone_everywhere', 0)} were gone from every source.")
        out += ["", "| source | asked | served | final failures |", "|---|---|---|---|"]
        for name, d in (dl.get("sources") or {}).items():
            failed = ", ".join(f"{_cell(k)} {v}" for k, v in sorted((d.get("failed") or {}).items()) if v) or "none"
            out.append(f"| {_cell(name)} | {d.get('asked', 0)} | {d.get('served', 0)} | {failed} |")
        out.append("")
    out.append("Released images per source: " + ", ".join(f"{_cell(k)} {v}" for k, v in sources["released"].items())
               + ".")
    return out


def _kit_md(kit: dict | None) -> list[str]:
    """The card's lines on the evaluation kit (`mining.kit`): what it is and its size per method."""
    if not kit:
        return []
    out = ["- `kit/`: the evaluation kit: per method the descriptors of every selected image (released or not: "
           "the set evaluated above), of the landmark queries and of the database, exactly as the run evaluated "
           "them (global vectors float16, ASMK's visual words and residual codes), the similarities the run ranked "
           "by, the method's settings, model (whitening, codebook), library versions and its own `SHA256SUMS`. "
           "`mining evaluate --kit kit --landmarks gnd_<name>.pkl` reproduces the table above (none and mined) "
           "without any image; `kit/README.md` says how to evaluate your own queries. Size of what grows with the "
           "set (the distractors' descriptors and every query's similarity to them, 4 bytes per query), measured "
           "here and scaled linearly (the landmark stores do not grow with the set):", "",
           "  | method | distractors | bytes per distractor | per million distractors |", "  |---|---|---|---|"]
    for m, v in kit["methods"].items():
        out.append(f"  | {_cell(m)} | {v['distractors']} | {v['bytes_per_distractor']} | {v['gb_per_million']} GB |")
    models = model_lines(kit["methods"])
    return out + ([""] + ["  " + line if line else line for line in models.splitlines()] if models else []) + [""]


def dataset_card(stats: dict, cand_stats: dict | None, evaluation: dict | None) -> str:
    """RELEASE/README.md: what the set is, how it was made, its licences, faces, hardness,
    checksums, how to cite and evaluate. Every value from metadata is Markdown-escaped."""
    audit = stats.get("audit")
    lines = _provenance_md(stats) + _funnel_md(stats, cand_stats) + _sources_md(stats.get("sources"))
    lines += ["", "## Leak rate (audit)", "", sentence(audit) if audit else
              "This set was **not audited** (`mining release` was given no `--audit`): its share of images that "
              "show a landmark has not been measured."]
    lines += _licences_md(stats["licences"]) + _faces_md(stats["faces"], stats)
    lines += _hardness_md(evaluation) + _files_md(stats)
    return "\n".join(lines + _CITE)


def _provenance_md(stats: dict) -> list[str]:
    """The card's title, what the set is and where it came from (the run's manifest, the code)."""
    lines = [
        "# Distractor set (R1M-style) — dataset card", "",
        f"{stats['released']} Flickr photographs from YFCC100M, mined as *hard distractors* for instance-level "
        "landmark retrieval (images that rank high against the landmark queries without showing a landmark), "
        f"in the layout of revisitop's R1M (`jpg/<3 hex>/<key>.jpg`, list in `{DISTRACTORS_TXT}`).", "",
        "## Provenance", "",
        "- Source: YFCC100M (Thomee et al. 2016), photos hosted by Flickr, each under the Creative Commons or "
        "public-domain licence given in `ATTRIBUTION.md` / `ATTRIBUTION.csv`.",
    ]
    if stats.get("manifest"):
        lines.append(f"- Run manifest: `{_cell(Path(stats['manifest']['path']).name)}` "
                     f"(sha256 `{stats['manifest']['sha256']}`).")
    lines.append(_code_md(stats["code"]))
    rebuild = stats.get("rebuild")
    if rebuild:
        lines.append(f"- Rebuild check: `{REBUILD}` (the {rebuild['selected']} selected photo ids in rank order, "
                     f"sha256 `{rebuild['selected_ids_sha256']}`, and {len(rebuild['stores_sha256'])} descriptor "
                     f"stores); a rebuild whose `{REBUILD}` is the same file is this set.")
    return lines


def _code_md(code: dict) -> str:
    """The provenance line of the code that made the release (`mining.publishing.version.code_version`)."""
    line = (f"- Code: {_cell(code['package'])}"
            + (f", git commit `{code['commit']}`" + (" with local changes" if code.get("local_changes") == "yes"
                                                     else "") if code.get("commit") else "") + ".")
    if "simd" not in code:  # a release made before the pins
        return line
    return line + "\n" + (f"- Libraries: requirements.lock sha256 `{code.get('lock_sha256') or 'none'}` "
                          f"(installed: {_cell(str(code.get('environment')))}); SIMD level "
                          f"`{_cell(str(code['simd']))}`; built on {_cell(str(code.get('cpu')))}.")


def _funnel_md(stats: dict, cand_stats: dict | None) -> list[str]:
    """The card's funnel: geofilter's counts, the selection, what the audit and the release left out."""
    lines = ["", "## How it was made (the funnel)", "", "| step | photos |", "|---|---|"]
    if cand_stats:
        if "photos_in" in cand_stats:
            lines.append(f"| YFCC100M metadata rows / photos read | {cand_stats.get('rows_in', '–')} / "
                         f"{cand_stats['photos_in']} |")
        for reason, count in (cand_stats.get("excluded") or {}).items():
            lines.append(f"| excluded: {_cell(reason)} | {count} |")
        if "photos_out" in cand_stats:
            lines.append(f"| candidates (geofilter) | {cand_stats['photos_out']} |")
    audit, review = stats.get("audit"), stats.get("review") or {}
    reviewed = "partly reviewed" if review.get("unanswered") else "reviewed"
    if audit:
        lines += [f"| selected (top-N by distractor score, {reviewed}) | {audit['set_size']} |",
                  f"| removed by the leak audit (landmark images found, their near-duplicates) | {audit['removed']} |"]
    else:
        lines.append(f"| selected (top-N by distractor score, {reviewed}) | {stats['selected']} |")
    for reason, count in stats["excluded"].items():
        lines.append(f"| left out by the release: {_cell(reason)} | {count} |")
    lines.append(f"| **released** | **{stats['released']}** |")
    if review.get("unanswered"):
        lines += ["", f"The selection was made from a partial review: {review.get('answered')} of the review queue's "
                  f"{review.get('queue_photos')} photos were answered (`mining select --partial-review allow`); "
                  f"{review['unanswered']} of them were never looked at by a person and may show a landmark, and the "
                  "selection may hold some of them."]
    return lines


def _licences_md(lic: dict) -> list[str]:
    """The card's licences: the policy, the counts per licence, the unknown ones as found."""
    lines = ["", "## Licences", "",
             f"Policy: **{_cell(lic['policy'])}**. `commercial` keeps licences that allow commercial use (CC BY, "
             "BY-SA, BY-ND, CC0, Public Domain Mark, no known copyright restrictions, US Government Work); `all` "
             "keeps every recognised open licence; a licence is recognised only when its URL is exactly one of "
             "YFCC100M's licence URLs and its name agrees, and images under an unknown licence are never released. "
             "**NoDerivs images (BY-ND, BY-NC-ND) are never modified: those where a face was found are left out "
             "of this release; those without a face are released unmodified.**", "",
             "| licence | selected | released | with faces | blurred |", "|---|---|---|---|---|"]
    for name, d in lic["per_licence"].items():
        lines.append(f"| {_cell(name)} | {d['selected']} | {d['released']} | {d['with_faces']} | {d['blurred']} |")
    if lic.get("unknown"):
        lines += ["", f"{lic['unknown']} selected photo(s) have an unknown licence (a name and URL that are not "
                  "exactly one of YFCC100M's licences) and were left out. As found (name, URL: photos):", ""]
        lines += [f"- {_cell(seen)}: {n}" for seen, n in lic.get("unknown_seen", {}).items()]
    return lines


def _faces_md(fc: dict, stats: dict) -> list[str]:
    """The card's faces: how they were looked for and blurred (`fc`: stats.json's `faces`), and
    how many."""
    if not fc["blur"]:
        return ["", "## Faces", "", "Faces were **not** blurred in this release (`--no-blur-faces`)."]
    return ["", "## Faces", "",
            f"Every image was checked for faces with {fc['detector']} (faces of at least "
            f"{fc['min_face_px']} px, confidence ≥ {fc['threshold']}); each face box, grown by "
            f"{int(fc['margin'] * 100)} % on every side, was Gaussian-blurred (sigma {fc['blur_sigma_of_box']} "
            "× the box's longer side) and the image re-encoded with its own JPEG quantization tables "
            f"(same size and quality). {stats['with_faces']} of {stats['checked_for_faces']} checked "
            f"images had faces; {stats['blurred']} were blurred ({stats['faces_blurred']} faces); "
            f"{stats['byte_copies']} released images are byte-identical to the downloaded ones. "
            "Face boxes are in `release.parquet`. A detector misses some faces (small, profile, occluded): "
            "report any you find."]


def _hardness_md(evaluation: dict | None) -> list[str]:
    """The card's mAP table (one per benchmark with several) from the run's evaluation.json."""
    lines = ["", "## How hard it is", ""]
    share = ((evaluation or {}).get("score_share") or {}).get("selected")
    if share:  # several benchmarks: one set, evaluated on each
        lines += ["One set for " + ", ".join(_cell(k) for k in share) + "; share of its score each contributes (%): "
                  + ", ".join(f"{_cell(k)} {_pct(v)}" for k, v in share.items()) + ".", ""]
    reports = list(evaluation["per_benchmark"].values()) if share else [evaluation] if evaluation else []
    for report in reports:
        lm = report.get("landmarks") or {}
        n, pool = report.get("n"), report.get("pool")
        lines += [f"mAP (%) on {_cell(lm.get('name', 'the landmark dataset'))} with no distractors, {n} random "
                  f"candidates (mean ± std over seeds {report.get('seeds')}), the {n} mined ones and all {pool} "
                  "candidates, as computed by `mining evaluate` before the release's licence and face rules "
                  f"(`{EVALUATION}` of the run).", "",
                  f"| method | setup | none | random {n} | mined {n} | all {pool} |", "|---|---|---|---|---|---|"]
        for m in report.get("methods", []):
            for s in report.get("setups", []):
                r = report["results"][m][s]
                rnd = r.get("random")
                rtxt = "–" if not rnd else _pct(rnd.get("mAP")) + (f" ± {_pct(rnd['mAP_std'])}" if "mAP_std" in rnd
                                                                   else "")
                lines.append(f"| {_cell(m)} | {_cell(s)} | {_pct((r.get('none') or {}).get('mAP'))} | {rtxt} | "
                             f"{_pct((r.get('mined') or {}).get('mAP'))} | {_pct((r.get('all') or {}).get('mAP'))} |")
        lines += [""] if share else []
    if not reports:
        lines.append(f"No evaluation was given to `mining release` (`--evaluation {EVALUATION}`).")
    return lines


def _files_md(stats: dict) -> list[str]:
    """The card's "How to evaluate with it" and the release's files."""
    lines = [
        "", "## How to evaluate with it", "",
        "Use it as R1M is used with Revisited Oxford and Paris (Radenović et al. 2018): add the images listed in "
        f"`{DISTRACTORS_TXT}` to the landmark dataset's database, rank them with your method, and compute revisitop's "
        "mAP (Easy / Medium / Hard) with the distractors counted as negatives. With this project: describe "
        "`jpg/` with `mining describe --set candidates` and run `mining evaluate` (docs/protocols.md).", "",
        "## Files", "",
        f"- `jpg/<3 hex>/<key>.jpg`: the images; `{DISTRACTORS_TXT}`: their paths, hardest first.",
        "- `release.parquet`: every selected image with its licence, whether it was released (`status`), "
        "face boxes, `blurred`, sha256.",
        "- `ATTRIBUTION.md` / `ATTRIBUTION.csv`: title, author, source and licence of every released image.",
    ]
    if stats["webdataset_shards"]:
        lines.append(f"- `webdataset/release-NNNNNN.tar` ({len(stats['webdataset_shards'])} shard(s)): WebDataset "
                     "(`<key>.jpg` + `<key>.json`), loadable with `datasets.load_dataset(\"webdataset\", "
                     "data_files=\"webdataset/*.tar\")`.")
    return lines + _kit_md(stats.get("kit")) + ["- `SHA256SUMS`: check with `sha256sum -c SHA256SUMS` in this folder."]


_CITE = [
    "", "## How to cite", "",
    "Cite the images' authors as `ATTRIBUTION.md` says (the licences require it), YFCC100M and the R1M protocol:",
    "", "```bibtex",
    "@article{thomee2016yfcc100m, title={{YFCC100M}: The New Data in Multimedia Research}, author={Thomee, "
    "Bart and Shamma, David A. and Friedland, Gerald and Elizalde, Benjamin and Ni, Karl and Poland, Douglas "
    "and Borth, Damian and Li, Li-Jia}, journal={Communications of the ACM}, volume={59}, number={2}, "
    "pages={64--73}, year={2016}}",
    "@inproceedings{radenovic2018revisiting, title={Revisiting {Oxford} and {Paris}: Large-Scale Image "
    "Retrieval Benchmarking}, author={Radenovi{\\'c}, Filip and Iscen, Ahmet and Tolias, Giorgos and "
    "Avrithis, Yannis and Chum, Ond{\\v{r}}ej}, booktitle={CVPR}, year={2018}}",
    "```", "",
]

