"""The landmark dataset (`mining.datasets.landmarks`): loaded from its gnd file, its landmarks,
positives, images and fingerprint; a file that cannot be loaded is a UserError."""

from __future__ import annotations

import pickle

import pytest
from gnd_files import oxford_revisitop

from mining.errors import UserError
from mining.datasets.landmarks import load_landmarks


OXFORD_LANDMARKS = ["all_souls", "ashmolean", "balliol", "bodleian", "christ_church", "cornmarket", "hertford",
                    "keble", "magdalen", "pitt_rivers", "radcliffe_camera"]


@pytest.mark.parametrize("layout", ["revisited", "original"])
def test_real_oxford_ground_truth_has_its_11_landmarks_of_5_queries(tmp_path, layout):
    path, truth = oxford_revisitop(tmp_path, layout)
    ds = load_landmarks(path)
    assert len(ds.qimlist) == 55
    # the names alone would get it wrong: 13 query images are named after another landmark or oxford_NNNNNN
    misnamed = [q for lm, qs in truth.items() for q in qs if not q.startswith(lm + "_")]
    assert len(misnamed) == 13 and "bodleian_000132" in truth["radcliffe_camera"]
    assert ds.landmarks == OXFORD_LANDMARKS
    assert ds.landmark_queries() == truth
    assert all(len(qs) == 5 for qs in ds.landmark_queries().values())
    # all_souls and radcliffe_camera share a positive image, and stay two landmarks
    souls, camera = (set(ds.positives(ds.qimlist.index(truth[lm][0]))) for lm in ("all_souls", "radcliffe_camera"))
    assert souls & camera


def test_load_landmarks_and_rules(tmp_path):
    gnd = {
        "imlist": ["a", "b", "c"],
        "qimlist": ["tower_001", "tower_002", "bridge_001"],
        "gnd": [
            {"bbx": [0, 0, 10, 10], "easy": [0], "hard": [2], "junk": [1]},
            {"bbx": [0, 0, 10, 10], "easy": [], "hard": [], "junk": []},
            {"bbx": [1, 2, 3, 4], "easy": [1], "hard": [], "junk": [], "landmark": "old_bridge"},
        ],
    }
    (tmp_path / "gnd_city.pkl").write_bytes(pickle.dumps(gnd))
    ds = load_landmarks(tmp_path)
    assert ds.name == "city"
    assert ds.landmarks == ["tower", "old_bridge"]
    assert ds.positives(0) == [0, 2] and ds.positives(1) == []
    assert ds.image_path("a") == tmp_path / "jpg" / "a.jpg"
    fp = ds.fingerprint()
    gnd["gnd"][0]["hard"] = []
    (tmp_path / "gnd_city.pkl").write_bytes(pickle.dumps(gnd))
    assert load_landmarks(tmp_path).fingerprint() != fp


def test_load_landmarks_errors_are_user_errors(tmp_path):
    with pytest.raises(UserError):
        load_landmarks(tmp_path / "missing.pkl")
    (tmp_path / "gnd_x.pkl").write_bytes(b"not a pickle")
    with pytest.raises(UserError):
        load_landmarks(tmp_path / "gnd_x.pkl")
