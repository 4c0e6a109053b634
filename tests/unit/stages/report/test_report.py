"""`mining report`: a single offline HTML file from a run folder; missing inputs → "not available"."""

import base64
import hashlib
import html
import json
import re
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from mining.settings import options
from mining.cli import main
from mining.stages.evaluate import stage as evaluate
from mining.datasets.landmarks import load_landmarks
from mining.photos import imageindex
from mining.settings.layout import image_relpath
from selection import write_decisions
from evaluate_world import build_world, run_inputs

from paths import ROOT as REPO


def _jpg(path, color):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (64, 48), color).save(path)


def make_run(tmp_path):
    """A run folder in the workflow's layout, built from the evaluate test world."""
    run = tmp_path / "run"
    world = build_world(tmp_path / "w")
    run.mkdir()
    ds, ids, landmark_ids, selected = run_inputs(world, run)
    (run / "world").mkdir()
    (world / "lm").rename(run / "world" / "landmarks")
    (world / "desc").rename(run / "descriptors")
    (run / "review").mkdir()
    (run / "decisions.parquet").rename(run / "review" / "decisions.parquet")
    ds = load_landmarks(run / "world" / "landmarks")
    for name in ds.qimlist:
        _jpg(ds.image_path(name), (200, 30, 30))
    for p in selected[:5]:
        _jpg(run / "images" / image_relpath(int(p)), (20, 20, 200))
    imageindex.write(run / "images", [{"photo_id": int(p), "status": "ok", "path": image_relpath(int(p))}
                                      for p in selected[:5]])
    # closest landmark of every scored candidate (what score writes)
    sc = pq.read_table(run / "scores" / "scores.parquet").to_pandas()
    sc["closest_landmark"] = np.where(np.arange(len(sc)) % 2, "lm0", "lm1")
    pq.write_table(pa.Table.from_pandas(sc, preserve_index=False), run / "scores" / "scores.parquet")
    inputs = evaluate.Inputs(landmarks=run / "world" / "landmarks", descriptors=[run / "descriptors" / "gem"],
                             scores=run / "scores", selected=run / "selected",
                             decisions=run / "review" / "decisions.parquet")
    evaluate.run(inputs=inputs, out=run / "evaluation", options=replace(options.defaults("evaluate"), random_seeds=[0, 1]), progress=False)
    dec = pq.read_table(run / "review" / "decisions.parquet")  # two reviewers; they split on the last item
    votes = ['{"ann": "y", "bob": "y"}'] * (dec.num_rows - 1) + ['{"ann": "n", "bob": "u"}']
    pq.write_table(dec.append_column("votes", pa.array(votes)), run / "review" / "decisions.parquet")
    (run / "metadata").mkdir()
    (run / "metadata" / "stats.json").write_text(json.dumps({"rows_in": 1000, "rows_out": 990, "rows_rejected": 10}))
    rng = np.random.default_rng(0)
    meta = pa.table({"photo_id": np.arange(990), "longitude": rng.uniform(-180, 180, 990), "latitude": rng.uniform(-90, 90, 990)})
    pq.write_table(meta, run / "metadata" / "part-00000.parquet")
    (run / "candidates").mkdir()
    (run / "candidates" / "stats.json").write_text(json.dumps({"rows_in": 990, "rows_out": 300, "excluded": {"country:GBR": 600, "area:las_vegas": 90}}))
    pq.write_table(meta.slice(0, 300), run / "candidates" / "candidates.parquet")
    (run / "images" / "summary.json").write_text(json.dumps({
        "photos": 300, "counts": {"ok": 280, "not_found": 15, "placeholder": 5},
        "alive_full_res": 250, "alive_low_res_only": 30, "gone_everywhere": 20,
        "sources": {"flickr": {"asked": 300, "served": 250, "failed": {"not_found": 40, "gone": 10}},
                    "mirror": {"asked": 50, "served": 30, "failed": {"not_found": 15, "unavailable_placeholder": 5}}}}))
    (run / "neardup").mkdir()  # two selected images as one near-duplicate group, one copying a query
    g = [int(p) for p in selected[:3]]
    pq.write_table(pa.table({"photo_id": g, "group": [g[0], g[0], g[2]], "group_size": [2, 2, 1],
                             "copy_of": [None, None, ds.qimlist[0]], "probable_landmark": [None, None, "lm0"]}),
                   run / "neardup" / "neardup.parquet")
    (run / "neardup" / "stats.json").write_text(json.dumps({
        "method": "gem", "thresholds": {"max_hash_distance": 10, "min_cosine": 0.9, "landmark_max_hash_distance": 14,
                                        "landmark_min_cosine": 0.6},
        "candidates": 240, "pairs": 1, "groups": 1, "redundant": 1, "copies_of_landmark_images": 1}))
    (run / "selected" / "auto_n.json").write_text(json.dumps({
        "n": 40, "tolerance": 0.05, "available": 237, "sizes": [1, 10, 40, 237], "rule": "smallest N ...",
        "binding": ["gem/hard"], "first_ok": {"gem": {"hard": 40}},
        "curves": {"gem": {"hard": {"none": 0.5, "all": 0.2, "mined": [0.45, 0.3, 0.205, 0.2]}}}}))
    (run / "leakrisk").mkdir()
    (run / "leakrisk" / "stats.json").write_text(json.dumps({
        "method": "gem", "candidates": 240, "thresholds": {"lm0": 0.8}, "high_risk": 12, "high_risk_in_queue": 3,
        "high_risk_outside_queue": 9, "outside_queue_examples": [{"photo_id": g[0], "risk": 0.97, "landmark": "lm0",
                                                                  "nearest": "db_001", "risk_rank": 1}]}))
    # the leak audit (mining audit): every selected image checked, the first one a landmark image
    sel = pq.read_table(run / "selected" / "distractors.parquet")
    if "rank" not in sel.column_names:  # select's rank (the test world's selection is in rank order)
        sel = sel.append_column("rank", pa.array(np.arange(1, sel.num_rows + 1)))
        pq.write_table(sel, run / "selected" / "distractors.parquet")
    assert main(["audit", "draw", "--selected", str(run / "selected"), "--out", str(run / "audit")]) == 0
    sampled = [p for s in json.loads((run / "audit" / "plan.json").read_text())["sampled_ids"] for p in s]
    write_decisions(tmp_path / "audit.parquet", [("lm0", p, "landmark" if p == g[0] else "not_landmark")
                                                 for p in sampled], kind="audit")
    assert main(["audit", "estimate", "--selected", str(run / "selected"), "--decisions", str(tmp_path / "audit.parquet"),
                 "--audit", str(run / "audit"), "--out", str(run / "audit")]) == 0
    (run / "benchmarks").mkdir()
    (run / "benchmarks" / "score.tsv").write_text("s\th:m:s\tmax_rss\tcpu_time\n12.5\t0:00:12\t345.6\t20.1\n")
    (tmp_path / "manifest.yaml").write_text((REPO / "manifests" / "demo.yaml").read_text()
                                            .replace("name: demo", "name: test-run").replace("n: 30", "n: 40"))
    return run


def test_report_from_run_folder_is_self_contained(tmp_path):
    run = make_run(tmp_path)
    out = tmp_path / "report.html"
    assert main(["report", "--run", str(run), "--manifest", str(tmp_path / "manifest.yaml"), "--out", str(out)]) == 0
    doc = out.read_text()
    assert "not available" not in doc
    assert 'src="http' not in doc and "<script" not in doc  # opens offline
    imgs = re.findall(r'src="data:image/(png|jpeg);base64,([^"]+)"', doc)
    assert len([k for k, _ in imgs if k == "png"]) >= 4  # funnel, scatter, scores, curve
    assert len([k for k, _ in imgs if k == "jpeg"]) >= 2 + 5  # query crops + downloaded thumbnails
    assert "<h3>lm0</h3><p>2 queries: lm0_000, lm0_003</p>" in doc  # the grouping: landmark → queries
    assert all(len(base64.b64decode(b)) > 100 for _, b in imgs)
    for text in ("alive only at low resolution</td><td>30 (10.0 %)", "gone everywhere</td><td>20 (6.7 %)",
                 "<td>mirror</td><td>50</td><td>30</td><td>not_found 15, unavailable_placeholder 5</td>",
                 "country:GBR", "status: not_found", "decided landmark", "candidates described (gem)",
                 "mined 40", "without sift", "test-run", "12.5"):
        assert text in doc, text
    ev = json.loads((run / "evaluation" / "evaluation.json").read_text())
    assert f"{100 * ev['results']['gem']['hard']['mined']['mAP']:.2f}" in doc
    assert "(2 images)</h3>" in doc and "probable lm0" in doc and "near-copies of landmark images" in doc
    assert "high risk, outside the review queue</td><td>9</td>" in doc and "lm0 0.970 (#1)" in doc
    assert "N = 40 of 237 usable candidates" in doc and "binding: gem/hard" in doc
    audit = json.loads((run / "audit" / "audit.json").read_text())  # the leak audit: a census, one leak found
    assert audit["method"] == "census" and audit["leaks_found"] == [g0 := int(audit["leaks_found"][0])]
    x = f"{100 / audit['set_size']:.2f} %"
    assert f"found 1 showing a landmark: estimated leak rate {x} of the set as selected, 95% one-sided upper bound {x}" in doc
    assert "at most <b>0.00 %</b> in the released set" in doc and f">{g0}</figcaption>" in doc
    # error bars: the bootstrap intervals and the paired mined − random difference, in the report
    from mining.publishing.text import fmt_interval

    ci = ev["ci"]["gem"]["hard"]
    assert "95 % confidence intervals over queries (bootstrap)" in doc
    assert fmt_interval(ci["mined"]) in doc
    assert f"{100 * ci['mined_minus_random']['diff']:+.2f} {fmt_interval(ci['mined_minus_random']['ci'])}" in doc
    # the report leads with the result: a specific title, the headline, then contents, provenance, availability
    from mining.publishing.text import fmt_p

    d = ci["mined_minus_random"]
    assert "<title>distractor-mining run test-run: distractors for " in doc
    head = doc[doc.index('<section id="result">'):doc.index('<section id="provenance">')]
    assert (f"<td>{html.escape(ev['landmarks']['name'])}</td><td>gem</td><td>hard</td><td>{100 * d['diff']:+.2f}</td><td>{fmt_interval(d['ci'])}</td>"
            f"<td>{html.escape(fmt_p(d['p_not_lower']))}</td>") in head
    assert f"the mined {ev['n']} cost gem " in head and " mAP points " in head
    order = [doc.index(s) for s in ('id="result"', 'class="toc"', 'id="provenance"', 'id="availability"', 'id="funnel"')]
    assert order == sorted(order)
    assert "manifest manifest.yaml sha256</td><td>" + hashlib.sha256((tmp_path / "manifest.yaml").read_bytes()).hexdigest() in doc
    # one unit per funnel chart; the review's gallery and the reviewers' agreement
    assert "<td>pool after review (usable candidates)</td>" in doc and "<td>review items</td>" in doc
    n_landmark = int((pq.read_table(run / "review" / "decisions.parquet").column("decision").to_numpy() == "landmark").sum())
    assert f"{n_landmark} review items decided <code>landmark</code>" in doc
    n_dec = pq.read_metadata(run / "review" / "decisions.parquet").num_rows
    assert f"{n_dec - 1} of {n_dec} items seen by several reviewers (2 reviewers in all)" in doc
    # every query of a landmark beside its hardest distractors, with rank and score
    assert doc.count('<figure class="query">') >= len(load_landmarks(run / "world" / "landmarks").qimlist)
    assert re.search(r"<figcaption>#\d+ · score [0-9.e+-]+ · \d+</figcaption>", doc)


def test_report_with_missing_inputs_says_not_available(tmp_path, capsys):
    run = tmp_path / "partial"
    (run / "metadata").mkdir(parents=True)
    (run / "metadata" / "stats.json").write_text(json.dumps({"rows_in": 5, "rows_out": 5, "rows_rejected": 0}))
    (run / "evaluation").mkdir()
    (run / "evaluation" / "evaluation.json").write_text("{broken")
    out = tmp_path / "r.html"
    assert main(["report", "--run", str(run), "--out", str(out)]) == 0
    doc = out.read_text()
    assert "rows read" in doc
    # incl. availability, near-duplicates, leak risk, the audit, N chosen, the result, the review gallery and agreement
    assert doc.count("not available") == 14  # every section that needs an input, the geometric evidence too
    assert "not available" in capsys.readouterr().out
    assert main(["report", "--run", str(tmp_path / "nope"), "--out", str(out)]) == 2


def test_report_reads_the_manifest_through_the_validating_loader(tmp_path, capsys):
    run = tmp_path / "partial"
    (run / "metadata").mkdir(parents=True)
    bad = tmp_path / "m.yaml"
    bad.write_text((REPO / "manifests" / "demo.yaml").read_text() + "name: other\n")
    assert main(["report", "--run", str(run), "--manifest", str(bad), "--out", str(tmp_path / "r.html")]) == 2
    assert "duplicate key name" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_headline_has_one_sentence_per_benchmark_and_escapes_names(tmp_path):
    """evaluation.json with `per_benchmark` (several benchmarks mined at once): one row per
    benchmark, method and setup, one sentence each, p as '< 0.0005' when it rounds to 0."""
    from mining.stages.report.stage import Inputs
    from mining.stages.report.headline import headline, title

    def bench(diff, p):
        return {"methods": ["cnn-gem"], "setups": ["easy", "medium"], "n": 30,
                "ci": {"cnn-gem": {s: {"mined_minus_random": {"diff": diff, "ci": [diff - 0.01, diff + 0.02], "p_not_lower": p}}
                                   for s in ("easy", "medium")}}}

    ev = {"per_benchmark": {"roxford5k": bench(-0.095, 0.0), "<b>rparis</b>": bench(0.012, 0.4123)}}
    (tmp_path / "evaluation.json").write_text(json.dumps(ev))
    inp = Inputs(evaluation=tmp_path / "evaluation.json")
    doc = headline(inp)
    assert "On roxford5k, the mined 30 cost cnn-gem 9.5 Medium mAP points more than a random 30 " \
           "(95 % interval 7.5 to 10.5; p &lt; 0.0005)." in doc
    assert "On &lt;b&gt;rparis&lt;/b&gt;, the mined 30 cost cnn-gem 1.2 Medium mAP points less than a random 30" in doc
    assert "<b>rparis" not in doc
    assert "<td>roxford5k</td><td>cnn-gem</td><td>medium</td><td>-9.50</td><td>[-10.50, -7.50]</td><td>&lt; 0.0005</td>" in doc
    assert "<td>0.412</td>" in doc and doc.count("<tr>") == 1 + 4
    assert title(inp) == "distractor-mining run report: distractors for roxford5k, <b>rparis</b>"  # escaped where printed


def test_report_size_benchmark_stays_bounded(tmp_path):
    """benchmarks/report_size.py: its synthetic run (every section it feeds available) and JSON;
    the galleries' caps hold (each landmark shows at most 8 distractors, at most 40 landmarks)."""
    from benchmarks.report_size import main as bench

    res = bench(["--rows", "2000", "--workdir", str(tmp_path), "--out", str(tmp_path / "size.json")])
    assert json.loads((tmp_path / "size.json").read_text()) == res
    assert res["rows"] == 2000 and res["html_bytes"] > 100_000 and res["build_s"] > 0
    assert set(res["sections_missing"]) == {"Near-duplicates and copies of landmark images",
                                            "Leak rate measured by the audit",
                                            "Leak risk beyond the review queue", "Settings and timings"}
    doc = (tmp_path / "report.html").read_text()
    assert doc.count("<h3>lm") == 40 and "landmarks beyond the first 40 are not shown" in doc
    assert len(re.findall(r"<figcaption>#\d+ · score", doc)) <= 40 * 8
