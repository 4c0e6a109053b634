"""`mining landmarks check` (`mining.datasets.datasetcheck`): the structure, the images on disk and
the grouping, every problem listed."""

from __future__ import annotations

import json

from gnd_files import oxford_revisitop, small_gnd, write_gnd

from mining.cli import main
from mining.datasets.datasetcheck import check_dataset
from mining.datasets.landmarks import load_landmarks


def test_landmarks_check_json_on_real_oxford(tmp_path, capsys):
    path, truth = oxford_revisitop(tmp_path)
    assert main(["landmarks", "check", str(path), "--json", "--no-images"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"landmarks", "queries", "database", "problems"}
    assert out["landmarks"] == [{"name": lm, "queries": qs} for lm, qs in truth.items()]
    assert out["queries"] == 55 and out["database"] == len(load_landmarks(path).imlist) and out["problems"] == []
    # without --no-images: the jpg/ folder is not there, and that is an error naming it
    assert main(["landmarks", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "database images are missing" in err and str(tmp_path / "jpg") in err


def test_check_warns_about_groupings_that_look_wrong(tmp_path, capsys):
    imlist = [f"img_{i}" for i in range(40)]
    gnd = [
        {"bbx": [0, 0, 1, 1], "easy": list(range(0, 10)), "hard": [], "junk": [], "landmark": "tower"},
        # labelled as another landmark but with the tower's positives: one landmark split in two
        {"bbx": [0, 0, 1, 1], "easy": list(range(0, 9)), "hard": [], "junk": [], "landmark": "clock"},
        {"bbx": [0, 0, 1, 1], "easy": list(range(20, 30)), "hard": [], "junk": []},
        {"bbx": [0, 0, 1, 1], "easy": [], "hard": [], "junk": [39]},  # no positives
    ]
    path = write_gnd(tmp_path, {"imlist": imlist, "qimlist": ["t_1", "c_1", "gate_1", "empty_1"], "gnd": gnd})
    assert main(["landmarks", "check", str(path), "--no-images"]) == 0  # warnings alone do not fail
    out = capsys.readouterr().out
    assert "warning: query 'c_1' (landmark 'clock'): 9 of its 9 positives are positives of landmark 'tower'" in out
    assert "warning: query 'empty_1' has no positives" in out
    assert "  gate (1): gate_1" in out and "  empty (1): empty_1" in out


def test_check_finds_missing_query_images_and_boxes_outside_them(tmp_path):
    from PIL import Image

    data = small_gnd()
    data["gnd"][1]["bbx"] = [0, 0, 50, 20]
    path = write_gnd(tmp_path, data)
    (tmp_path / "jpg").mkdir()
    for name in data["imlist"] + ["tower_002"]:
        Image.new("RGB", (40, 30)).save(tmp_path / "jpg" / f"{name}.jpg")
    rep = check_dataset(path)
    assert [(p.level, p.query, p.key) for p in rep.problems] == [("error", "tower_001", "qimlist"),
                                                                 ("warning", "tower_002", "bbx")]
    assert "reaches outside the 40×30 image" in rep.problems[1].message
