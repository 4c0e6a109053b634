"""The Snakemake workflow: dry runs of every shipped manifest, lint, bad manifests, and the
tiny demo world end to end (uninterrupted, and killed-then-resumed with identical outputs)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from mining.cli import build_parser
from mining.flags import cluster_of
from snakerun import REPO, SNAKEMAKE, snakemake
from snakerun import path_without_venv as _path_without_venv

MANIFESTS = sorted((REPO / "manifests").glob("*.yaml"))


def _touch_inputs(manifest: Path, workdir: Path) -> None:
    """Create empty stand-ins for a real manifest's input files, so a dry run can plan it."""
    m = yaml.safe_load(manifest.read_text())
    paths = list(m.get("metadata", []))
    if isinstance(m.get("landmarks"), list):  # several benchmarks
        paths += [b["gnd"] for b in m["landmarks"]]
    elif m.get("landmarks") and m["landmarks"] != "demo":
        paths.append(m["landmarks"])
    for p in paths:
        target = workdir / p
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()


@pytest.mark.parametrize("manifest", MANIFESTS, ids=[m.stem for m in MANIFESTS])
def test_dry_run_every_shipped_manifest(manifest, tmp_path):
    _touch_inputs(manifest, tmp_path)
    r = snakemake(tmp_path, "-n", "--cores", "2", manifest=manifest)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "rule score" in r.stdout or "score" in r.stdout


def test_ingest_takes_the_places_and_hash_files_as_inputs(tmp_path):
    """The manifest's `places:` and `hashes:` files are the ingest rule's inputs (a changed one
    reruns it), given to `mining ingest` as files, quoted."""
    m = yaml.safe_load((REPO / "manifests" / "r1m.yaml").read_text())
    m.update(places="data/my places.bz2", hashes="data/yfcc100m_hash.bz2")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump(m))
    _touch_inputs(manifest, tmp_path)
    for f in ("data/my places.bz2", "data/yfcc100m_hash.bz2"):
        (tmp_path / f).touch()
    r = snakemake(tmp_path, "-n", "-p", "--cores", "2", "--until", "ingest", manifest=manifest)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    import shlex

    shell = next(line for line in r.stdout.splitlines() if line.startswith("Shell command: ") and "mining ingest" in line)
    words = shlex.split(shell.split("mining ingest", 1)[1])
    assert words[words.index("--places") + 1] == "data/my places.bz2" and words[words.index("--hash") + 1] == \
        "data/yfcc100m_hash.bz2", shell
    job = r.stdout.split("rule ingest:", 1)[1].split("\n\n", 1)[0]
    assert "data/my places.bz2" in job.split("input:", 1)[1].split("\n", 1)[0], job


def test_lint_is_clean(tmp_path):
    r = snakemake(tmp_path, "--lint", manifest=REPO / "manifests" / "demo.yaml")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Lints for rule" not in r.stdout + r.stderr


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda m: m.update(bogus=1), "bogus"),
        (lambda m: m["geofilter"]["countries"].append({"code": "XYZ", "include_dependencies": False}), "XYZ"),
        (lambda m: m["geofilter"]["areas"][0].update(radius_km=-5), "radius"),
        (lambda m: m["select"].update(n=0), "select.n"),
        (lambda m: m.update(methods=["cnn-gem", "sift-magic"]), "methods[1]: unknown method 'sift-magic'"),
    ],
    ids=["unknown-key", "unknown-country", "negative-radius", "bad-n", "unknown-method"],
)
def test_bad_manifest_fails_fast_naming_the_key(tmp_path, edit, key):
    m = yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())
    edit(m)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(m))
    t0 = time.monotonic()
    r = snakemake(tmp_path, "-n", "--cores", "1", manifest=bad)
    assert r.returncode != 0
    assert key in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    assert time.monotonic() - t0 < 60
    assert not (tmp_path / "results").exists()


# ------------------------------------------------- manifest paths never reach the shell raw


def _micro(tmp_path: Path, **top) -> Path:
    m = yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())
    m["demo"]["preset"] = "micro"
    m.update(top)
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(m))
    return path


def test_every_rule_quotes_manifest_paths(tmp_path):
    """Dry run of every rule with a results folder holding a space: each shell command,
    split as the shell splits it, keeps every path whole."""
    r = snakemake(tmp_path, "-n", "-p", "--cores", "2", manifest=_micro(tmp_path, results="results/my run"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    shells = [l.removeprefix("Shell command: ") for l in r.stdout.splitlines()
              if l.startswith("Shell command:") and l != "Shell command: None"]  # None: rule all
    assert len(shells) >= 12, r.stdout[-3000:]
    import shlex

    for cmd in shells:
        words = shlex.split(cmd)
        assert "run" not in words and not any(w.startswith("run/") for w in words), cmd
        assert any("results/my run/" in w for w in words), cmd


@pytest.mark.slow
def test_a_hostile_results_path_runs_the_first_stages(tmp_path):
    """A real run up to the download (demo world, ingest, geofilter, the demo server and the
    downloader) into a folder whose name has a space and a command between semicolons:
    outputs land in the folder as written and nothing in the path is executed. In
    human-review mode the run does not claim the review queue is ready: it is not."""
    results = "results/my run;touch FILE;"
    work = tmp_path / "work"
    work.mkdir()
    m = _micro(tmp_path, results=results, review={"mode": "human"})
    r = snakemake(work, "--cores", "2", "--until", "download", manifest=m)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "review queue is ready" not in r.stdout + r.stderr  # it is not: the run stopped at download
    root = work / results
    assert json.loads((root / "candidates/stats.json").read_text())["rows_out"] > 0
    assert json.loads((root / "images/summary.json").read_text())
    assert list((root / "images/jpg").rglob("*.jpg"))
    assert not (work / "FILE").exists() and not list(tmp_path.rglob("FILE")), "a manifest path ran a command"


@pytest.mark.parametrize("top, key", [
    ({"results": "results/{x}"}, "results"),
    ({"results": "-rf"}, "results"),
    ({"name": "../etc"}, "name"),
    ({"download": {"host": "http://x';touch FILE;'"}}, "download.host"),
], ids=["wildcard", "option", "name", "host"])
def test_unsafe_manifest_strings_are_refused_before_anything_runs(tmp_path, top, key):
    r = snakemake(tmp_path, "-n", "--cores", "1", manifest=_micro(tmp_path, **top))
    assert r.returncode != 0
    assert f": {key}: " in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    assert not (tmp_path / "results").exists() and not (tmp_path / "FILE").exists()


# ---------------------------------------------------------------- end to end (tiny demo)

OUTPUTS = [
    "results/demo/selected/distractors.txt",
    "results/demo/selected/distractors.parquet",
    "results/demo/evaluation/evaluation.json",
    "results/demo/report.html",
]


# `demo_run` (one local run of the tiny demo, shared with tests/slurm) is in tests/conftest.py.


@pytest.mark.slow
def test_demo_end_to_end_outputs_exist_and_agree(demo_run):
    for rel in OUTPUTS:
        assert (demo_run / rel).is_file(), rel
    root = demo_run / "results/demo"
    listed = (root / "selected/distractors.txt").read_text().split()
    table = pd.read_parquet(root / "selected/distractors.parquet")
    assert listed == list(table["path"]), "list and table disagree"
    assert 0 < len(listed) <= 30
    for rel in listed[:20]:
        assert (root / "images" / rel).is_file(), rel
    decisions = pd.read_parquet(root / "review/decisions.parquet")
    confirmed = set(decisions.loc[decisions["decision"] == "landmark", "photo_id"])
    assert not confirmed & set(table["photo_id"]), "a confirmed landmark image was selected"
    evaluation = json.loads((root / "evaluation/evaluation.json").read_text())
    # the demo manifest keeps rsift-asmk's keypoints: its +SP ranking is evaluated beside it
    assert set(evaluation["results"]) == {"cnn-gem", "rsift-asmk", "rsift-asmk+SP", "rsift-vlad", "cnn-gem-lite2"}
    assert evaluation["held_out"] == ["cnn-gem-lite2"]  # the demo's held-out network: evaluated, never scored
    for method, setups in evaluation["results"].items():
        assert set(setups) == {"easy", "medium", "hard"}, setups  # E, M and H, as the revisited protocol reports
        for setup, r in setups.items():
            assert r["none"]["mAP"] >= r["random"]["mAP"] >= r["all"]["mAP"] - 1e-12, (method, setup)
            if r["all"]["mAP"] == r["none"]["mAP"]:
                continue  # a saturated setup (no candidate outranks a positive): nothing to prove there
            # The proof the set is hard: mined N hurts more than random N, close to all candidates.
            assert r["mined"]["mAP"] < r["random"]["mAP"], (method, setup, r)
            assert abs(r["mined"]["mAP"] - r["all"]["mAP"]) < abs(r["random"]["mAP"] - r["all"]["mAP"]), (method, setup)
    # The selection finds the world's hard negatives far more often than chance would.
    truth = pd.read_parquet(root / "world/truth.parquet")[["photo_id", "kind"]]
    pool = pd.read_parquet(root / "scores/scores.parquet")[["photo_id"]].merge(truth, on="photo_id")
    chosen = table[["photo_id"]].merge(truth, on="photo_id")
    share_pool = (pool["kind"] == "hard_negative").mean()
    share_chosen = (chosen["kind"] == "hard_negative").mean()
    assert share_chosen > 1.5 * share_pool, (share_chosen, share_pool)
    html = (root / "report.html").read_text()
    assert "<html" in html.lower() and len(html) > 10_000
    for log in (root / "logs").rglob("*.log"):
        assert "Traceback" not in log.read_text(), log


def test_docs_demo_md_is_the_demo_runs_summary(demo_run):
    """docs/demo.md (where the README points for the demo's figures) is this run's
    evaluation/summary.md byte for byte (`make demo` copies it), not typed from some older run;
    and the summary is this run's evaluation."""
    summary = (demo_run / "results/demo/evaluation/summary.md").read_text()
    e = json.loads((demo_run / "results/demo/evaluation/evaluation.json").read_text())
    cnn = e["results"]["cnn-gem"]["medium"]
    assert (f"| cnn-gem | Medium | {100 * cnn['none']['mAP']:.2f} | {100 * cnn['random']['mAP']:.2f} ± "
            f"{100 * cnn['random']['mAP_std']:.2f} | {100 * cnn['mined']['mAP']:.2f} | {100 * cnn['all']['mAP']:.2f} |"
            in summary)
    assert f"N = {e['n']} distractors of {e['pool']} usable candidates" in summary
    assert (REPO / "docs/demo.md").read_text() == summary, "docs/demo.md is not the demo run's: run `make demo`"
    assert "docs/demo.md" in (REPO / "README.md").read_text()


# A Flickr answer that sends the photo on to the next source (the rest are retried on Flickr)
FLICKR_FINAL = {"not_found", "gone", "forbidden", "placeholder", "truncated", "wrong_type", "small"}


def test_demo_availability_matches_the_worlds_truth(demo_run):
    """Two sources on the demo: what the world's server has (its faults, a pure function of the
    world seed and photo) decides, photo by photo, which source served it, and the figures in
    summary.json, the report and the dataset card are those counts."""
    from PIL import Image

    from mining.stages.demo.fake_flickr import DemoServer
    from mining.settings.layout import key_relpath

    root = demo_run / "results/demo"
    index = pd.read_parquet(root / "images/index.parquet").set_index("photo_id")
    candidates = pd.read_parquet(root / "candidates/candidates.parquet", columns=["photo_id"]).photo_id
    assert sorted(index.index) == sorted(candidates)
    want = {}
    with DemoServer(root / "world") as srv:  # only its per-photo answers are read
        for pid in candidates:
            with Image.open(root / "world/images" / f"{pid}.jpg") as im:
                big = max(im.size) >= 1024  # download.min_size
            if srv.fault_of(pid) not in FLICKR_FINAL and big:
                want[pid] = ("flickr", False)
            elif srv.mirror_fault_of(pid) is None:
                want[pid] = ("multimedia-commons", True)
            else:
                want[pid] = (None, None)
    got = {pid: (None, None) if pd.isna(r.source) else (r.source, bool(r.low_res)) for pid, r in index.iterrows()}
    assert got == want
    ok = index[index.status == "ok"]
    assert all(ok.path == [key_relpath(h) for h in ok.photo_hash])      # keyed by YFCC's photo hash
    summary = json.loads((root / "images/summary.json").read_text())
    full = sum(1 for s, low in want.values() if s and not low)
    low = sum(1 for s, low in want.values() if s and low)
    gone = sum(1 for s, _ in want.values() if s is None)
    assert (summary["alive_full_res"], summary["alive_low_res_only"], summary["gone_everywhere"]) == (full, low, gone)
    assert low > 0 and gone > 0 and full > 0                                # the demo exercises all three
    assert summary["sources"]["flickr"]["asked"] == len(candidates)
    assert summary["sources"]["multimedia-commons"]["asked"] == low + gone
    html = (root / "report.html").read_text()
    assert f"alive only at low resolution</td><td>{low} (" in html
    card = (root / "release/README.md").read_text()
    assert f"{full} were still available at full resolution, {low} only at low resolution" in card
    # select.require_full_res (the default): no mirror copy in the set
    chosen = pd.read_parquet(root / "selected/distractors.parquet")
    assert set(chosen.source) == {"flickr"} and list(chosen.photo_hash) == list(index.loc[chosen.photo_id].photo_hash)


def _wait_for(path_glob: str, root: Path, proc: subprocess.Popen, timeout: float) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if list(root.glob(path_glob)):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.2)
    return False


@pytest.fixture(scope="module")
def micro_manifest(tmp_path_factory) -> Path:
    """The demo manifest on the `micro` world (a few images): the same stages, in ~2 minutes."""
    m = yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())
    m["demo"]["preset"] = "micro"
    m["select"]["n"] = 5
    m["describe"]["shard_size"] = 5  # several shards and learning tasks, to kill in between
    m["score"]["review_top"] = 10
    path = tmp_path_factory.mktemp("micro") / "micro.yaml"
    path.write_text(yaml.safe_dump(m))
    return path


@pytest.fixture(scope="module")
def micro_run(tmp_path_factory, micro_manifest):
    work = tmp_path_factory.mktemp("micro-run")
    r = snakemake(work, "--cores", "2", manifest=micro_manifest)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return work


# The same bytes whatever the cores, the worker counts they imply, and kills + resumes.
SAME_BYTES = ["results/demo/scores/scores.parquet", "results/demo/selected/distractors.txt",
              "results/demo/selected/distractors.parquet"]
EVALUATION = "results/demo/evaluation/evaluation.json"


def _without_timings(obj):
    if isinstance(obj, dict):
        return {k: _without_timings(v) for k, v in obj.items() if k != "seconds"}
    return [_without_timings(v) for v in obj] if isinstance(obj, list) else obj


def _assert_same_outputs(a: Path, b: Path) -> None:
    for rel in SAME_BYTES:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    ea, eb = (json.loads((x / EVALUATION).read_text()) for x in (a, b))
    assert _without_timings(ea) == _without_timings(eb), EVALUATION  # all but its "seconds"
    models = sorted(p.relative_to(a) for p in (a / "results/demo/descriptors").rglob("model.npz"))
    assert len(models) == 4 and all(  # cnn-gem, the held-out cnn-gem-lite2, rsift-asmk, rsift-vlad
        (a / m).read_bytes() == (b / m).read_bytes() for m in models)


def _kill_when(path_glob: str, work: Path, manifest: Path, what: str, cores: int = 2) -> None:
    """Run the workflow on `cores` and SIGKILL all of it once `path_glob` exists (mid-stage)."""
    cmd = [*SNAKEMAKE, "--snakefile", str(REPO / "Snakefile"), "--directory", str(work), "--cores", str(cores),
           "--config", f"manifest={manifest}"]
    env = dict(os.environ, PATH=_path_without_venv())
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    try:
        assert _wait_for(path_glob, work, proc, timeout=600), f"the workflow never reached {what}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (work / OUTPUTS[0]).exists()
    # What a user does after a kill -9: unlock, then the same command (the default profile
    # has rerun-incomplete); finished shards are kept by the stages themselves.
    r = snakemake(work, "--unlock", manifest=manifest)
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.slow
def test_killed_resumed_and_one_core_runs_give_identical_outputs(micro_run, micro_manifest, tmp_path):
    """SIGKILL the whole workflow in the middle of the download (on 2 cores), then in the
    middle of describe (on 1 core: one shard of 5 written), and finish it on 1 core; compare
    with the uninterrupted 2-core run. `--cores 1` means one worker per fan-out stage and one
    thread per rule (2 and 2 with `--cores 2`), so the stages after describe ran only on one
    core here, describe on both, download resumed on one: the same bytes whatever the cores,
    the worker counts they imply, and kills + resumes (one run instead of two: CI time)."""
    work = tmp_path / "resumed"
    work.mkdir()
    _kill_when("results/demo/images/jpg/*/*.jpg", work, micro_manifest, "the download stage", cores=2)
    _kill_when("results/demo/descriptors/*/candidates/shards/00000.ids.parquet", work, micro_manifest,
               "the describe stage", cores=1)
    r = snakemake(work, "--cores", "1", manifest=micro_manifest)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    _assert_same_outputs(micro_run, work)
    ok_a = sorted(p.name for p in (micro_run / "results/demo/images/jpg").rglob("*.jpg"))
    ok_b = sorted(p.name for p in (work / "results/demo/images/jpg").rglob("*.jpg"))
    assert ok_a == ok_b


@pytest.mark.parametrize("dask, where", [
    ({"cluster": "scheduler", "scheduler": "tcp://10.1.2.3:8786"}, ("tcp://10.1.2.3:8786", None)),
    ({"cluster": "slurm", "slurm": "workflows/profiles/slurm/dask-jobqueue.yaml"},
     (None, "workflows/profiles/slurm/dask-jobqueue.yaml")),
], ids=["scheduler", "slurm"])
def test_one_manifest_key_moves_fan_out_stages_to_another_cluster(tmp_path, dask, where):
    """The rules pass the manifest (--manifest), not cluster flags: the download and describe
    command lines of the dry run, parsed by the `mining` CLI itself, run on the manifest's
    cluster (--workers beside it sizes only a local cluster and is not used)."""
    m = yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())
    m["dask"] = dask
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(m))
    r = snakemake(tmp_path, "-n", "-p", "--cores", "2", manifest=path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    shells = [l for l in r.stdout.splitlines() if l.startswith("Shell command:")]
    download = [l for l in shells if "mining download" in l]
    candidates = [l for l in shells if "--set candidates" in l]
    assert download and candidates
    parser = build_parser()
    for line in download + candidates:
        words = shlex.split(line.split("> ")[0])
        words = words[words.index("mining", words.index("mining") + 1 if "serve" in words else 0) + 1:]
        args = parser.parse_args(words)
        assert args.command in ("download", "describe") and Path(args.manifest) == path, words
        assert cluster_of(args) == where, words
