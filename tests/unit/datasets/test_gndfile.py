"""Reading a gnd file (`mining.datasets.gndfile`): an untrusted pickle never runs code, numpy's
pickles (numpy 1 and 2, every protocol) still load, and the 1-based .mat form is made 0-based."""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.io as sio
from gnd_files import small_gnd, write_gnd

from mining.cli import main
from mining.errors import UserError
from mining.datasets.landmarks import load_gnd, load_landmarks


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
