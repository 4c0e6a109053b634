"""The release stage on the demo run (the session's shared `demo_run`, tests/conftest.py):
the workflow's own release agrees with the run and verifies; then real faces (scikit-image's
photographs) planted into some selected candidates are blurred by `mining release`, and
every other image is released byte for byte."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pyarrow.parquet as pq
from faces import face_patches, iou, plant
from PIL import Image

from mining.cli import main
from mining.publishing.leakbound import sentence


def test_workflow_release_matches_the_run_and_verifies(demo_run):
    root = demo_run / "results/demo"
    rel = root / "release"
    r = subprocess.run(["sha256sum", "-c", "--strict", "--quiet", "SHA256SUMS"], cwd=rel, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    selected = json.loads((root / "selected/stats.json").read_text())
    audit = json.loads((root / "audit/audit.json").read_text())
    table = pq.read_table(rel / "release.parquet").to_pandas()
    assert len(table) == selected["n_selected"] - audit["removed"] == audit["released_set_size"]
    released = table[table.status == "released"]
    assert (rel / "distractors.txt").read_text().splitlines() == list(released.sort_values("selection_rank").path)
    card = (rel / "README.md").read_text()
    assert f"| selected (top-N by distractor score, reviewed) | {selected['n_selected']} |" in card
    # the leak audit: the simulated reviewers answered from the world's truth, so what it found is the truth
    truth = pq.read_table(root / "world/truth.parquet").to_pandas().set_index("photo_id")["kind"]
    chosen = pq.read_table(root / "selected/distractors.parquet").column("photo_id").to_pylist()
    leaks = sorted(p for p in chosen if truth.get(p) == "landmark")
    assert audit["method"] == "census" and audit["sampled"] == len(chosen)  # the tiny demo's 30: all checked
    assert audit["leaks_found"] == leaks and audit["estimate"] == len(leaks) / len(chosen)
    assert sentence(audit) in card and "one-sided upper bound" in card
    assert not set(leaks) & set(table.photo_id)
    assert f"| **released** | **{len(released)}** |" in card
    funnel = json.loads((root / "candidates/stats.json").read_text())
    assert f"| candidates (geofilter) | {funnel['photos_out']} |" in card
    for row in released.itertuples():
        if not row.blurred:
            assert (rel / row.path).read_bytes() == (root / "images" / row.path).read_bytes()


def test_planted_faces_in_demo_candidates_are_blurred(demo_run, tmp_path):
    root = demo_run / "results/demo"
    images = tmp_path / "images"
    shutil.copytree(root / "images" / "jpg", images / "jpg")
    sel = pq.read_table(root / "selected/distractors.parquet").to_pandas().sort_values("rank")
    patches = face_patches()
    planted = {}
    for k, row in enumerate(sel.head(6).itertuples()):  # a real face in 6 of the selected candidates
        path = images / row.path
        with Image.open(path) as im:
            img, q = np.asarray(im.convert("RGB")), im.quantization
        img, box = plant(img, *patches[k % 2], 40 + 60 * k, 60, 64 + 16 * k)
        Image.fromarray(img).save(path, "JPEG", qtables=q)
        planted[row.photo_id] = box
    out = tmp_path / "release"
    rc = main(["release", "--selected", str(root / "selected"), "--images", str(images), "--out", str(out), "--licenses", "all",
               "--candidates", str(root / "candidates/candidates.parquet"), "--workers", "2", "--no-kit"])
    assert rc == 0
    table = pq.read_table(out / "release.parquet").to_pandas().set_index("photo_id")
    for pid, box in planted.items():
        faces = json.loads(table.face_boxes[pid])
        assert faces and max(iou(box, f[:4]) for f in faces) > 0.4, (pid, box, faces)
        if table.status[pid] == "noderivs_face":  # NoDerivs: never modified, left out
            assert not (out / table.path[pid]).exists()
            continue
        a = np.asarray(Image.open(images / table.path[pid]).convert("RGB"), np.float32)
        b = np.asarray(Image.open(out / table.path[pid]).convert("RGB"), np.float32)
        x, y, w, h = box
        assert np.abs(a - b)[y:y + h, x:x + w].mean() > 8
    for pid in set(table.index) - set(planted):
        if table.status[pid] == "released" and not table.blurred[pid]:
            assert (out / table.path[pid]).read_bytes() == (images / table.path[pid]).read_bytes()
    assert re.search(r"\| \*\*released\*\* \| \*\*\d+\*\* \|", (out / "README.md").read_text())
