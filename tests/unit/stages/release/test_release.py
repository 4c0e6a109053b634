"""mining release: faces blurred (real faces from scikit-image planted in drawn scenes),
face-free images byte-identical, licence policies, the NoDerivs rule, the card's numbers,
checksums that `sha256sum -c` verifies, WebDataset shards, same bytes on a rerun."""

from __future__ import annotations

import io
import json
import re
import subprocess
import tarfile
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from faces import face_patches, iou, plant
from PIL import Image
from scenes import scene

from mining.cli import main
from mining.errors import UserError
from mining.settings.layout import image_relpath
from mining.publishing.licences import Policy, licence_code
from mining.settings.options import defaults
from mining.stages.release.blur import FaceDetector
from releasing import run_release

BY = ("Attribution License", "http://creativecommons.org/licenses/by/2.0/")
BY_SA = ("Attribution-ShareAlike License", "http://creativecommons.org/licenses/by-sa/2.0/")
BY_ND = ("Attribution-NoDerivs License", "http://creativecommons.org/licenses/by-nd/2.0/")
BY_NC = ("Attribution-NonCommercial License", "http://creativecommons.org/licenses/by-nc/2.0/")
BY_NC_SA = ("Attribution-NonCommercial-ShareAlike License", "http://creativecommons.org/licenses/by-nc-sa/2.0/")
BY_NC_ND = ("Attribution-NonCommercial-NoDerivs License", "http://creativecommons.org/licenses/by-nc-nd/2.0/")
HOSTILE = ("<img src=x onerror=alert(1)> All Rights Reserved", "")

# photo id: (licence, faces planted as (patch index, x, y, face width), grey image)
WORLD = {
    101: (BY, [(0, 40, 30, 90)], False),
    102: (BY_NC_SA, [], False),
    103: (BY_NC, [(1, 300, 150, 64)], False),
    104: (BY_ND, [], False),
    105: (BY_NC_ND, [(0, 250, 60, 80)], False),
    106: (HOSTILE, [], False),
    107: (BY_SA, [], False),
    108: (BY, [(0, 20, 40, 70), (1, 320, 170, 60)], False),
    109: (BY_SA, [(1, 150, 100, 70)], True),
}
FACELESS = [102, 104, 106, 107]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("release-world")
    images = root / "images"
    patches = face_patches()
    planted = {}
    rows = []
    for rank, (pid, ((lic, url), faces, grey)) in enumerate(WORLD.items(), 1):
        img = cv2.GaussianBlur(scene(pid, 512, 384), (0, 0), 1.0)  # photo-like: no per-pixel noise
        boxes = []
        for k, x, y, fw in faces:
            img, box = plant(img, *patches[k], x, y, fw)
            boxes.append(box)
        planted[pid] = boxes
        pil = Image.fromarray(img).convert("L") if grey else Image.fromarray(img)
        path = images / image_relpath(pid)
        path.parent.mkdir(parents=True, exist_ok=True)
        pil.save(path, "JPEG", quality=87)
        rows.append({"rank": rank, "photo_id": pid, "path": image_relpath(pid), "url": f"https://x/{pid}.jpg",
                     "license_name": lic, "license_url": url, "user_nsid": f"{pid}@N00",
                     "user_nickname": "*owner* <b>" if pid == 101 else f"owner {pid}", "score": 10.0 - rank,
                     "source": "mirror" if rank % 4 == 0 else "flickr"})
    (images / "summary.json").write_text(json.dumps({
        "photos": 40, "alive_full_res": 25, "alive_low_res_only": 5, "gone_everywhere": 10,
        "sources": {"flickr": {"asked": 40, "served": 25, "failed": {"gone": 15}},
                    "mirror|x": {"asked": 15, "served": 5, "failed": {"not_found": 10}}}}))
    sel = root / "selected"
    sel.mkdir()
    pq.write_table(pa.Table.from_pandas(pd.DataFrame(rows), preserve_index=False), sel / "distractors.parquet")
    cand = pd.DataFrame({"photo_id": list(WORLD), "server_id": 1, "secret": "abc",
                         "license_name": [v[0][0] for v in WORLD.values()],
                         "license_url": [v[0][1] for v in WORLD.values()],
                         "user_nsid": [f"{p}@N00" for p in WORLD], "title": "[x](javascript:alert(1)) `t`",
                         "page_url": [f"https://www.flickr.com/photos/o/{p}/" for p in WORLD]})
    pq.write_table(pa.Table.from_pandas(cand, preserve_index=False), root / "candidates.parquet")
    (root / "cstats.json").write_text(json.dumps({"rows_in": 30, "photos_in": 29, "photos_out": 9,
                                                  "excluded": {"country:GBR": 12, "no_geotag": 8}}))
    (root / "evaluation.json").write_text(json.dumps({
        "landmarks": {"name": "demo"}, "n": 5, "pool": 9, "seeds": [0, 1], "methods": ["cnn-gem"],
        "setups": ["medium"], "results": {"cnn-gem": {"medium": {
            "none": {"mAP": 0.6036}, "random": {"mAP": 0.561, "mAP_std": 0.0103}, "mined": {"mAP": 0.4466},
            "all": {"mAP": 0.4418}}}}}))
    (root / "m.yaml").write_text("name: x\n")
    return root, planted


def release(world, out: str, **kw):
    root, _ = world
    args = dict(candidates=root / "candidates.parquet", candidates_stats=root / "cstats.json",
                evaluation=root / "evaluation.json", manifest=root / "m.yaml")
    args.update(kw)
    return run_release(root / "selected", root / "images", root / out, **args)


@pytest.fixture(scope="module")
def full(world):
    stats = release(world, "rel", licenses="all", tar=True, shard_size=4)
    return world[0] / "rel", stats


def _pixels(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"), np.float32)


def _grow(box, m):
    x, y, w, h = box
    return x - int(w * m) - 16, y - int(h * m) - 16, x + w + int(w * m) + 16, y + h + int(h * m) + 16


def test_planted_faces_are_blurred_and_nothing_else_changes(world, full):
    root, planted = world
    rel, stats = full
    table = pq.read_table(rel / "release.parquet").to_pandas().set_index("photo_id")
    for pid, boxes in planted.items():
        if not boxes or table.status[pid] != "released":
            continue
        found = json.loads(table.face_boxes[pid])
        for b in boxes:  # every planted face found (same place) ...
            assert max(iou(b, f[:4]) for f in found) > 0.4, (pid, b, found)
        assert table.blurred[pid]
        src, out = _pixels(root / "images" / image_relpath(pid)), _pixels(rel / image_relpath(pid))
        assert src.shape == out.shape
        diff = np.abs(src - out).mean(-1)
        outside = np.ones(diff.shape, bool)
        for b in boxes:  # ... and blurred: large change inside
            x, y, w, h = b
            assert diff[y:y + h, x:x + w].mean() > 8, (pid, diff[y:y + h, x:x + w].mean())
            x0, y0, x1, y1 = _grow(b, 0.25)
            outside[max(y0, 0):y1, max(x0, 0):x1] = False
        assert diff[outside].mean() < 1.0 and np.percentile(diff[outside], 99) < 5, pid  # JPEG re-encoding noise only
        with Image.open(root / "images" / image_relpath(pid)) as a, Image.open(rel / image_relpath(pid)) as b:
            assert a.quantization == b.quantization and a.mode == b.mode  # same JPEG quality
    assert stats["blurred"] == 4 and stats["faces_blurred"] == 5


def test_face_free_images_are_byte_copies(world, full):
    root, _ = world
    rel, _ = full
    for pid in (102, 104, 107):
        assert (rel / image_relpath(pid)).read_bytes() == (root / "images" / image_relpath(pid)).read_bytes()
    table = pq.read_table(rel / "release.parquet").to_pandas().set_index("photo_id")
    assert (table.faces[FACELESS] == 0).all()  # the drawn scenes have no false detections


def test_noderivs_with_a_face_left_out_without_released_unmodified(world, full):
    rel, stats = full
    table = pq.read_table(rel / "release.parquet").to_pandas().set_index("photo_id")
    assert table.status[105] == "noderivs_face" and table.faces[105] >= 1
    assert not (rel / image_relpath(105)).exists()
    assert table.status[104] == "released" and not table.blurred[104]
    assert "never modified" in (rel / "README.md").read_text()
    assert stats["excluded"] == {"licence_unknown": 1, "noderivs_face": 1}


def test_outputs_agree_and_checksums_verify(world, full):
    rel, stats = full
    table = pq.read_table(rel / "release.parquet").to_pandas()
    released = table[table.status == "released"].sort_values("selection_rank")
    listed = (rel / "distractors.txt").read_text().splitlines()
    assert listed == list(released.path)  # revisitop form, hardest first
    assert sorted(p.relative_to(rel).as_posix() for p in (rel / "jpg").rglob("*.jpg")) == sorted(listed)
    r = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=rel, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    summed = {line.split("  ", 1)[1] for line in (rel / "SHA256SUMS").read_text().splitlines()}
    assert summed == {p.relative_to(rel).as_posix() for p in rel.rglob("*") if p.is_file()} - {"SHA256SUMS"}
    for row in released.itertuples():
        import hashlib
        assert hashlib.sha256((rel / row.path).read_bytes()).hexdigest() == row.sha256


def test_card_numbers_match_the_run(world, full):
    rel, stats = full
    card = (rel / "README.md").read_text()
    table = pq.read_table(rel / "release.parquet").to_pandas()
    n = int((table.status == "released").sum())
    assert f"| **released** | **{n}** |" in card and n == 7 == stats["released"]
    assert f"| selected (top-N by distractor score, reviewed) | {len(table)} |" in card
    assert "| candidates (geofilter) | 9 |" in card and "| excluded: country\\:GBR | 12 |" in card
    for name, grp in table.groupby("license_name"):
        released, faces = int((grp.status == "released").sum()), int((grp.faces > 0).sum())
        row = [line for line in card.splitlines() if line.startswith("| ") and
               re.fullmatch(rf"\| .+ \| {len(grp)} \| {released} \| {faces} \| {int(grp.blurred.sum())} \|", line)]
        assert row, name
    assert "| cnn-gem | medium | 60.36 | 56.10 ± 1.03 | 44.66 | 44.18 |" in card
    assert "<img" not in card and "&lt;img src\\=x onerror\\=alert\\(1\\)&gt;" in card  # escaped metadata
    assert "Attribution License" in card and "sha256 `" in card and "distractor-mining" in card
    assert "@article{thomee2016yfcc100m" in card
    # where the images came from: the download's figures, per source, escaped, and what was released
    assert "25 were still available at full resolution, 5 only at low resolution, and 10 were gone" in card
    assert "| mirror\\|x | 15 | 5 | not\\_found 10 |" in card
    released_src = {s: int((table.status == "released")[table.source == s].sum()) for s in ("flickr", "mirror")}
    assert stats["sources"]["released"] == {k: v for k, v in released_src.items() if v}
    attribution = (rel / "ATTRIBUTION.md").read_text()
    assert "faces were blurred" in attribution and "javascript" not in attribution.replace("javascript:", "", 0) \
        or "\\[x\\]" in attribution
    assert "[x](javascript" not in attribution and len(attribution.splitlines()) == 7 + n


def test_webdataset_shards(world, full):
    rel, _ = full
    listed = (rel / "distractors.txt").read_text().splitlines()
    shards = sorted((rel / "webdataset").glob("*.tar"))
    assert [s.name for s in shards] == ["release-000000.tar", "release-000001.tar"]
    members = []
    for s in shards:
        with tarfile.open(s) as tf:
            for m in tf.getmembers():
                assert m.mtime == 0 and m.uid == 0 and m.uname == ""
                members.append((m.name, tf.extractfile(m).read()))
    jpgs = [(n, d) for n, d in members if n.endswith(".jpg")]
    assert [n for n, _ in jpgs] == [Path(p).name for p in listed]
    assert all(d == (rel / p).read_bytes() for (_, d), p in zip(jpgs, listed))
    meta = [json.loads(d) for n, d in members if n.endswith(".json")]
    assert [m["path"] for m in meta] == listed and all("license_code" in m for m in meta)


def test_same_inputs_same_bytes(world, full):
    rel, _ = full
    again = world[0] / "rel2"
    release(world, "rel2", licenses="all", tar=True, shard_size=4, workers=3)
    files = sorted(p.relative_to(rel) for p in rel.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert [f for f in files if (rel / f).read_bytes() != (again / f).read_bytes()] == []


class _Counting(FaceDetector):
    """The real detector, counting its calls; with `stop_after`, it dies on call stop_after + 1
    (as a killed job would: the run stops mid-way)."""

    calls = 0
    attempts = 0
    stop_after: int | None = None

    def detect(self, rgb):
        _Counting.attempts += 1
        if _Counting.stop_after is not None and _Counting.calls >= _Counting.stop_after:
            raise KeyboardInterrupt("killed")
        _Counting.calls += 1
        return super().detect(rgb)


def test_a_stopped_release_resumes_and_gives_the_same_bytes(world, full):
    """Killed after 4 images, rerun: only the other 5 are checked again, and every file equals
    the uninterrupted run's. Other settings on the rerun start over."""
    rel, stats = full
    checked = stats["checked_for_faces"]  # 8: the image under an unknown licence is never read
    root = world[0]
    _Counting.calls, _Counting.attempts, _Counting.stop_after = 0, 0, 4
    with pytest.raises(KeyboardInterrupt):
        release(world, "rel-resumed", licenses="all", tar=True, shard_size=4, detector_factory=_Counting)
    # the stop did not wait for the images left: at most the one submitted ahead (1 worker) was tried
    assert _Counting.attempts <= 4 + 2
    staging = root / ".rel-resumed.partial"
    journal = (staging / ".journal.jsonl").read_text().splitlines()
    assert len(journal) == 4 and not (root / "rel-resumed").exists()
    (staging / ".journal.jsonl").write_text("\n".join(journal) + '\n{"row": 7, "photo_')  # a torn last line
    _Counting.calls, _Counting.stop_after = 0, 2  # stopped again, after 2 more
    with pytest.raises(KeyboardInterrupt):
        release(world, "rel-resumed", licenses="all", tar=True, shard_size=4, detector_factory=_Counting)
    # the torn line is gone, so the 2 new lines are whole lines of their own
    assert _Counting.calls == 2 and len((staging / ".journal.jsonl").read_text().splitlines()) == 6
    _Counting.calls, _Counting.stop_after = 0, None
    release(world, "rel-resumed", licenses="all", tar=True, shard_size=4, detector_factory=_Counting)
    assert checked == len(WORLD) - 1 and _Counting.calls == checked - 6
    again = root / "rel-resumed"
    files = sorted(p.relative_to(rel) for p in rel.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert [f for f in files if (rel / f).read_bytes() != (again / f).read_bytes()] == []
    assert not staging.exists()
    # other settings: the stopped run's work is not reused
    _Counting.calls, _Counting.stop_after = 0, 2
    with pytest.raises(KeyboardInterrupt):
        release(world, "rel-other", licenses="all", detector_factory=_Counting)
    _Counting.calls, _Counting.stop_after = 0, None
    release(world, "rel-other", licenses="all", margin=0.5, detector_factory=_Counting)
    assert _Counting.calls == checked


@pytest.mark.parametrize("spec, expected", [
    ("commercial", {101, 104, 107, 108, 109}),
    (["Attribution-NonCommercial License", "http://creativecommons.org/licenses/by-nc-sa/2.0/", "BY-SA"],
     {102, 103, 107, 109}),
])
def test_licence_policies_select_the_right_subsets(world, spec, expected):
    stats = release(world, "policy", licenses=spec, blur=False)
    out = world[0] / "policy"
    table = pq.read_table(out / "release.parquet").to_pandas()
    assert set(table.photo_id[table.status == "released"]) == expected == \
        {int(p) for p in table.photo_id if (out / image_relpath(int(p))).exists()}
    assert stats["released"] == len(expected)
    assert "Faces were **not** blurred" in (out / "README.md").read_text()


def test_licence_codes_from_yfcc_names_and_urls():
    for (name, url), code in ((BY, "by"), (BY_SA, "by-sa"), (BY_ND, "by-nd"), (BY_NC, "by-nc"),
                              (BY_NC_SA, "by-nc-sa"), (BY_NC_ND, "by-nc-nd")):
        assert licence_code(name, url) == code
        assert licence_code(name, None) is None is licence_code(None, url)  # known only from both
    assert licence_code("No known copyright restrictions", "https://www.flickr.com/commons/usage/") == "nkcr"
    assert licence_code("Public Domain Dedication (CC0)", "https://creativecommons.org/publicdomain/zero/1.0/") == "cc0"
    assert licence_code("United States Government Work", "http://www.usa.gov/copyright.shtml") == "us-gov"
    assert licence_code("All Rights Reserved", "") is None and licence_code(None, None) is None
    com = Policy.parse("commercial")
    assert [com.allows(n, u, licence_code(n, u)) for n, u in (BY, BY_SA, BY_ND, BY_NC, BY_NC_SA, BY_NC_ND)] == \
        [True, True, True, False, False, False]
    assert not Policy.parse("all").allows(*HOSTILE, None)
    with pytest.raises(UserError, match="stand alone"):
        Policy.parse(["all", "by"])


def test_detector_finds_the_real_faces_shipped_with_scikit_image():
    from skimage import data

    d = defaults("release")
    det = FaceDetector(d.face_threshold, d.min_face_px)
    for img, truth in ((data.astronaut(), (182, 63, 87, 111)), (np.stack([data.camera()] * 3, -1), (202, 122, 54, 75))):
        found = det.detect(img)
        assert len(found) == 1 and iou(found[0][:4], truth) > 0.7


def test_bad_input_is_one_line(world, tmp_path, capsys):
    root, _ = world
    with pytest.raises(UserError, match="not a folder"):
        run_release(root / "selected", tmp_path / "nope", tmp_path / "out")
    broken = tmp_path / "images"
    (broken / "jpg").mkdir(parents=True)
    with pytest.raises(UserError, match="image of photo 101 not found"):
        run_release(root / "selected", broken, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    rc = main(["release", "--selected", str(root / "selected"), "--images", str(root / "images"), "--out", str(tmp_path / "o"),
               "--licenses", "all", "by"])
    assert rc == 2 and "stand alone" in capsys.readouterr().err


def test_cli_writes_the_release(world, tmp_path, capsys):
    root, _ = world
    out = tmp_path / "cli"
    rc = main(["release", "--selected", str(root / "selected"), "--images", str(root / "images"), "--out", str(out),
               "--licenses", "commercial", "--no-blur-faces", "--no-kit"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["released"] == 5
    assert (out / "SHA256SUMS").is_file() and not any(out.parent.glob(".cli.*"))
    assert io.BytesIO((out / "distractors.txt").read_bytes()).read().count(b"\n") == 5
