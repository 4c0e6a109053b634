"""Landmarks come from the ground truth (`mining.datasets.grouping`): queries grouped by their
positives, named by what most of their names share or by an explicit `landmark` key."""

from __future__ import annotations

import pickle

import numpy as np

from mining.datasets.grouping import find_landmarks
from mining.datasets.landmarks import load_landmarks


def synthetic_city(rng, n_landmarks=11, per=5):
    """A city whose queries of one landmark have overlapping but not identical positives (revisitop's
    per-query labels), with one database image positive for two neighbouring landmarks."""
    imlist = [f"img_{i:05d}" for i in range(n_landmarks * 40 + 50)]
    gnd, truth = [], []
    for lm in range(n_landmarks):
        pool = np.arange(lm * 40, lm * 40 + 40)
        for k in range(per):
            pos = rng.choice(pool, size=int(rng.integers(28, 35)), replace=False)
            if lm:  # shares one image with the previous landmark, like all_souls and radcliffe_camera
                pos = np.append(pos, lm * 40 - 1)
            easy, hard = np.array_split(rng.permutation(pos), 2)
            gnd.append({"bbx": [1.0, 2.0, 30.0, 40.0], "easy": sorted(easy.tolist()), "hard": sorted(hard.tolist()),
                        "junk": [n_landmarks * 40 + lm]})
            truth.append(lm)
    order = rng.permutation(len(gnd))  # queries of a landmark are not adjacent
    names = [f"city_query_{i:03d}" for i in range(len(gnd))]
    return {"imlist": imlist, "qimlist": names, "gnd": [gnd[i] for i in order]}, [truth[i] for i in order]


def test_renamed_queries_still_give_the_right_landmarks(tmp_path):
    data, truth = synthetic_city(np.random.default_rng(5))
    groups, warnings = find_landmarks(data["qimlist"], data["gnd"])
    assert len(groups) == 11 and warnings == []
    got = sorted(sorted(qs) for _, qs in groups)
    want = sorted(sorted(i for i, t in enumerate(truth) if t == lm) for lm in range(11))
    assert got == want
    # one name stem for every query: no name is unique, so the landmarks are numbered in query order
    assert [name for name, _ in groups] == [f"landmark_{k:02d}" for k in range(1, 12)]
    assert [qs[0] for _, qs in groups] == sorted(qs[0] for _, qs in groups)


def test_names_come_from_what_most_queries_share_and_explicit_keys_win(tmp_path):
    data, truth = synthetic_city(np.random.default_rng(1), n_landmarks=2, per=5)
    data["qimlist"] = [("tower" if t else "bridge") + f"_{i:03d}" for i, t in enumerate(truth)]
    data["qimlist"][0] = "oxford_000001"  # one query named after nothing: the majority still names the group
    (tmp_path / "gnd_city.pkl").write_bytes(pickle.dumps(data))
    ds = load_landmarks(tmp_path)
    assert sorted(ds.landmarks) == ["bridge", "tower"]
    assert all(ds.query_landmark(i) == ("tower" if t else "bridge") for i, t in enumerate(truth))
    # an explicit `landmark` key wins; an unlabelled query with the same positives joins it
    for i, t in enumerate(truth):
        if t == 1 and i != truth.index(1):
            data["gnd"][i]["landmark"] = "clock_tower"
    (tmp_path / "gnd_city.pkl").write_bytes(pickle.dumps(data))
    ds = load_landmarks(tmp_path)
    assert {ds.query_landmark(i) for i, t in enumerate(truth) if t == 1} == {"clock_tower"}
    assert {ds.query_landmark(i) for i, t in enumerate(truth) if t == 0} == {"bridge"}


def test_a_query_without_positives_joins_the_group_its_name_claims():
    gnd = [{"bbx": [0, 0, 1, 1], "easy": [0, 1], "hard": [], "junk": []},
           {"bbx": [0, 0, 1, 1], "easy": [], "hard": [], "junk": []},
           {"bbx": [0, 0, 1, 1], "easy": [2], "hard": [], "junk": []}]
    groups, warnings = find_landmarks(["tower_001", "tower_002", "bridge_001"], gnd)
    assert groups == [("tower", [0, 1]), ("bridge", [2])]
    assert [w.query for w in warnings] == ["tower_002"]
