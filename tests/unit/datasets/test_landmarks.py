"""Landmarks come from the ground truth; a broken or hostile landmark file is refused with its place named."""

from __future__ import annotations

import json
import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.io as sio

from mining.cli import main
from mining.errors import UserError
from mining.stages.evaluate.protocols.oxford import load_oxford_gt
from mining.datasets.datasetcheck import check_dataset
from mining.datasets.grouping import find_landmarks
from mining.datasets.landmarks import load_gnd, load_landmarks

from paths import OXFORD

OXFORD_LANDMARKS = ["all_souls", "ashmolean", "balliol", "bodleian", "christ_church", "cornmarket", "hertford",
                    "keble", "magdalen", "pitt_rivers", "radcliffe_camera"]


def oxford_revisitop(folder: Path, layout: str = "revisited") -> tuple[Path, dict[str, list[str]]]:
    """The real Oxford 5k ground truth as revisitop lays it out: qimlist = the query images' own names.

    `revisited`: easy = good, hard = ok, junk = junk (gnd_roxford5k.pkl's keys); `original`: ok = good ∪ ok,
    junk (gnd_oxford5k.pkl's keys). Numpy arrays, as revisitop's pickles hold them. Returns the file and the
    truth: landmark (the gt file name minus `_<n>`) → its query image names.
    """
    qs = load_oxford_gt(OXFORD)
    imlist = sorted(set().union(*(q.good | q.ok | q.junk for q in qs)) | {q.image for q in qs})
    index = {n: i for i, n in enumerate(imlist)}
    ids = lambda names: np.array(sorted(index[n] for n in names), np.int64)  # noqa: E731
    gnd = []
    for q in qs:
        g = {"bbx": np.array(q.bbox, np.float64), "junk": ids(q.junk - q.positives)}
        if layout == "revisited":
            g.update(easy=ids(q.good), hard=ids(q.ok - q.good))
        else:
            g.update(ok=ids(q.positives))
        gnd.append(g)
    path = folder / f"gnd_oxford5k_{layout}.pkl"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps({"imlist": imlist, "qimlist": [q.image for q in qs], "gnd": gnd}, protocol=2))
    truth: dict[str, list[str]] = {}
    for q in qs:
        truth.setdefault(re.sub(r"_\d+$", "", q.name), []).append(q.image)
    return path, truth


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


def synthetic_city(rng, n_landmarks=11, per=5):
    """A city whose queries of one landmark have overlapping but not identical positives (revisitop's
    per-query labels), with one database image positive for two neighbouring landmarks."""
    imlist = [f"img_{i:05d}" for i in range(n_landmarks * 40 + 50)]
    qimlist, gnd, truth = [], [], []
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


def write_gnd(folder: Path, data) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gnd_city.pkl"
    path.write_bytes(pickle.dumps(data))
    return path


def small_gnd():
    return {"imlist": ["a", "b", "c", "d"], "qimlist": ["tower_001", "tower_002"],
            "gnd": [{"bbx": [0, 0, 10, 10], "easy": [0], "hard": [1], "junk": []},
                    {"bbx": [1, 1, 5, 6], "easy": [0, 1], "hard": [], "junk": [3]}]}


@pytest.mark.parametrize("query,key,value,message", [
    (1, "easy", [0, -1], "gnd.easy holds index -1"),  # silently changed mAP before
    (0, "hard", [99999], "gnd.hard holds index 99999"),  # a traceback before
    (1, "junk", [4], "gnd.junk holds index 4, outside the database (imlist has 4 images: 0..3)"),
    (0, "easy", [0.5], "gnd.easy must hold integer indices"),
    (0, "easy", "abc", "gnd.easy must be a list of database indices, found str"),
    (0, "hard", [[1, 2]], "gnd.hard must be a list of database indices, found list of shape (1, 2)"),
    (1, "bbx", None, "gnd.bbx is missing"),  # a traceback in describe before
    (1, "bbx", [0, 0, 10], "gnd.bbx must be 4 numbers x1 y1 x2 y2, found 3"),
    (0, "bbx", [0, 0, float("nan"), 5], "gnd.bbx must be 4 finite numbers"),
    (0, "bbx", [10, 0, 5, 5], "x1 < x2 and y1 < y2"),
    (0, "bbx", ["a", 0, 5, 5], "gnd.bbx must be 4 numbers"),
    (1, "landmark", 7, "gnd.landmark must be a name"),
])
def test_broken_gnd_is_refused_naming_file_query_and_key(tmp_path, capsys, query, key, value, message):
    data = small_gnd()
    if value is None:
        del data["gnd"][query][key]
    else:
        data["gnd"][query][key] = value
    path = write_gnd(tmp_path, data)
    name = data["qimlist"][query]
    with pytest.raises(UserError) as err:
        load_landmarks(path)
    assert str(path) in str(err.value) and repr(name) in str(err.value) and message in str(err.value)
    # every stage loads through the same reader: score refuses before reading any descriptor
    assert main(["score", "--landmarks", str(path), "--descriptors", str(tmp_path / "none"),
                 "--out", str(tmp_path / "scores")]) == 2
    assert message in capsys.readouterr().err
    assert main(["landmarks", "check", str(path), "--json", "--no-images"]) == 2
    captured = capsys.readouterr()
    problems = json.loads(captured.out)["problems"]
    assert [(p["level"], p["query"], p["key"]) for p in problems] == [("error", name, key)]
    assert message in captured.err and repr(name) in captured.err


def test_check_lists_every_error_and_the_load_says_how_many(tmp_path, capsys):
    data = small_gnd()
    data["gnd"][0]["easy"] = [-1]
    data["gnd"][1]["bbx"] = [1, 2]
    data["qimlist"].append("bridge_001")
    path = write_gnd(tmp_path, data)
    with pytest.raises(UserError, match=r"gnd has 2 entries but qimlist 3 \(and 2 more; `\S*mining landmarks check"):
        load_landmarks(path)
    assert main(["landmarks", "check", str(path), "--json", "--no-images"]) == 2
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert [(p["query"], p["key"]) for p in problems] == [(None, "gnd"), ("tower_001", "easy"), ("tower_002", "bbx")]
    for bad in ({"imlist": []}, ["not", "a", "dict"]):
        path = write_gnd(tmp_path, bad)
        with pytest.raises(UserError, match="expected keys imlist, qimlist and gnd"):
            load_landmarks(path)


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


def test_a_query_without_positives_joins_the_group_its_name_claims():
    gnd = [{"bbx": [0, 0, 1, 1], "easy": [0, 1], "hard": [], "junk": []},
           {"bbx": [0, 0, 1, 1], "easy": [], "hard": [], "junk": []},
           {"bbx": [0, 0, 1, 1], "easy": [2], "hard": [], "junk": []}]
    groups, warnings = find_landmarks(["tower_001", "tower_002", "bridge_001"], gnd)
    assert groups == [("tower", [0, 1]), ("bridge", [2])]
    assert [w.query for w in warnings] == ["tower_002"]


# ---- untrusted pickles never run code -------------------------------------------------------


class _Payload:
    def __init__(self, target: Path):
        self.target = target

    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


def test_pickle_payload_is_refused_and_never_runs(tmp_path, capsys):
    target = tmp_path / "pwned"
    data = small_gnd()
    data["gnd"][0]["easy"] = _Payload(target)
    path = write_gnd(tmp_path / "lm", data)
    # the payload is real: plain pickle runs it
    pickle.loads(path.read_bytes())
    assert target.exists()
    target.unlink()
    with pytest.raises(UserError) as err:
        load_landmarks(path)
    assert str(err.value) == (f"refusing to load {path}: it asks for {os.system.__module__}.system, "
                              "which a landmark file never holds")
    assert not target.exists()
    for argv in (["landmarks", "check", str(path)], ["score", "--landmarks", str(path), "--descriptors", "x",
                                                    "--out", str(tmp_path / "s")]):
        assert main(argv) == 2
        assert "refusing to load" in capsys.readouterr().err
        assert not target.exists()


@pytest.mark.parametrize("name", ["builtins.eval", "subprocess.Popen", "numpy.load", "numpy.testing.runstring"])
def test_other_globals_are_refused(tmp_path, name):
    module, attr = name.rsplit(".", 1)
    # protocol 2: GLOBAL 'module attr', an empty tuple, REDUCE
    raw = b"\x80\x02c" + module.encode() + b"\n" + attr.encode() + b"\n)R."
    path = tmp_path / "gnd_x.pkl"
    path.write_bytes(raw)
    with pytest.raises(UserError, match=re.escape(f"it asks for {name}, which a landmark file never holds")):
        load_landmarks(path)


@pytest.mark.parametrize("protocol", [0, 2, 3, 4, 5])
def test_a_numpy_gnd_still_loads(tmp_path, protocol):
    gnd = {"imlist": np.array(["a", "b", "c"]).tolist(), "qimlist": ["q_000001"],
           "gnd": [{"bbx": np.array([1.5, 2.0, 30.0, 40.0]), "easy": np.array([0, 2], np.int64),
                    "hard": np.array([1], np.int32), "junk": np.array([], np.int64), "weight": np.float32(0.5),
                    "tags": {"x"}, "raw": b"\x00\xff"}]}
    path = tmp_path / "gnd_x.pkl"
    path.write_bytes(pickle.dumps(gnd, protocol=protocol))
    ds = load_landmarks(path)
    assert ds.positives(0) == [0, 1, 2] and ds.bbox(0) == (1.5, 2.0, 30.0, 40.0)
    assert ds.gnd[0]["tags"] == {"x"} and ds.gnd[0]["raw"] == b"\x00\xff" and ds.gnd[0]["weight"] == np.float32(0.5)
    assert ds.landmarks == ["q"]


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


def test_a_gnd_pickled_by_numpy_1_loads_without_warnings(tmp_path):
    """revisitop's files were written by numpy 1, whose arrays name `numpy.core.multiarray`."""
    import warnings

    gnd = {"imlist": ["a", "b"], "qimlist": ["q"],
           "gnd": [{"bbx": np.array([1.0, 2.0, 3.0, 4.0]), "easy": np.array([1]), "hard": np.array([], np.int64),
                    "junk": np.array([0])}]}
    raw = pickle.dumps(gnd, protocol=2)
    assert b"numpy._core.multiarray\n" in raw
    path = tmp_path / "gnd_x.pkl"
    path.write_bytes(raw.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = load_landmarks(path)
    assert ds.positives(0) == [1] and ds.bbox(0) == (1.0, 2.0, 3.0, 4.0)


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


def test_load_gnd_pkl_and_one_based_mat(tmp_path):
    data = {"imlist": ["a", "b", "c"], "qimlist": ["q1"], "gnd": [{"bbx": [1.0, 2.0, 3.0, 4.0], "easy": [0, 2], "hard": [1], "junk": []}]}
    (tmp_path / "gnd_x.pkl").write_bytes(pickle.dumps(data))
    assert load_gnd(tmp_path / "gnd_x.pkl") == data
    gnd = np.zeros((1,), dtype=[("bbx", "O"), ("easy", "O"), ("hard", "O"), ("junk", "O")])
    gnd[0] = (np.array([1.0, 2, 3, 4]), np.array([1, 3]), np.array([2]), np.zeros(0))
    sio.savemat(tmp_path / "gnd_x.mat", {"imlist": np.array(["a", "b", "c"], dtype=object),
                                         "qimlist": np.array(["q1"], dtype=object), "gnd": gnd})
    assert load_gnd(tmp_path / "gnd_x.mat") == data
    gnd[0] = (np.array([1.0, 2, 3, 4]), np.array([0]), np.zeros(0), np.zeros(0))
    sio.savemat(tmp_path / "bad.mat", {"imlist": np.array(["a"], dtype=object), "qimlist": np.array(["q1"], dtype=object), "gnd": gnd})
    with pytest.raises(UserError, match="1-based"):
        load_gnd(tmp_path / "bad.mat")
