"""A landmark file (gnd_*.pkl) is the user's, or a stranger's: it never chooses its own memory
and its image names never leave its `jpg/` folder.

The pickles here are real attack files: a few bytes that ask the unpickler for a constructor
with a size of the file's choosing (`bytearray(n)`, an array of n elements, an object array
whose state is shorter than its shape, which crashes numpy), and gnd files naming images
outside `jpg/`. Each is run through `mining landmarks check` (in a child process where the old
behaviour was a crash or a memory blow-up) and must end in one line, exit 2.
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mining.cli import main
from mining.errors import UserError
from mining.datasets.datasetcheck import check_dataset
from mining.datasets.landmarks import load_landmarks
from paths import ROOT

_RECONSTRUCT = np.ndarray.__reduce__(np.zeros(1))[0]  # numpy's own _reconstruct, as real pickles name it


def _protocol2_call(module: str, name: str, n: int) -> bytes:
    """`module.name(n)` as a protocol-2 pickle: GLOBAL, BININT n, TUPLE1, REDUCE, STOP."""
    return b"\x80\x02c" + module.encode() + b"\n" + name.encode() + b"\nJ" + struct.pack("<i", n) + b"\x85R."


class _Array:
    """Pickles as numpy's array recipe (`_reconstruct`, then BUILD with a state) of the test's choosing."""

    def __init__(self, shape, state=None):
        self.shape, self.state = shape, state

    def __reduce__(self):
        args = (np.ndarray, self.shape, b"b")
        return (_RECONSTRUCT, args) if self.state is None else (_RECONSTRUCT, args, self.state)


def _gnd(easy) -> dict:
    return {"imlist": ["a", "b"], "qimlist": ["q"], "gnd": [{"bbx": [0, 0, 5, 5], "easy": easy, "hard": []}]}


def _check_in_child(path: Path) -> tuple[int, str, int]:
    """`mining landmarks check PATH` in a fresh Python: (exit status, stderr, the child's peak RSS in MB)."""
    # VmHWM, not ru_maxrss: the latter keeps the forking parent's size across exec
    code = ("import re, sys\nfrom mining.cli import main\nrc = main(['landmarks', 'check', sys.argv[1]])\n"
            "hwm = re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)\n"
            "print(int(hwm) // 1024, file=sys.stderr)\nsys.exit(rc)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, timeout=120)
    lines = r.stderr.strip().splitlines()
    peak = int(lines[-1]) if lines and lines[-1].isdigit() else -1
    return r.returncode, "\n".join(lines[:-1] if peak >= 0 else lines), peak


HOSTILE = {
    # 0.4 GB asked for by a file of a few dozen bytes
    "bytearray(n)": lambda: _protocol2_call("__builtin__", "bytearray", 400_000_000),
    "bytes(n)": lambda: _protocol2_call("__builtin__", "bytes", 400_000_000),
    # an empty array whose recipe asks for 400 M elements up front
    "array made large": lambda: pickle.dumps(_gnd(_Array((400_000_000,))), protocol=2),
    # a float64 array state of 50 M elements (0.4 GB) with no data behind it
    "array state larger than its data": lambda: pickle.dumps(
        _gnd(_Array((0,), (1, (50_000_000,), np.dtype("f8"), False, b""))), protocol=2),
    # an object array state of 100 M elements holding one value: numpy reads past the list (a crash)
    "object array state shorter than its shape": lambda: pickle.dumps(
        _gnd(_Array((0,), (1, (100_000_000,), np.dtype("O"), False, [1]))), protocol=2),
}


@pytest.mark.parametrize("attack", list(HOSTILE))
def test_a_gnd_file_never_chooses_its_own_memory(tmp_path, attack):
    path = tmp_path / "gnd_x.pkl"
    path.write_bytes(HOSTILE[attack]())
    assert path.stat().st_size < 400
    rc, err, peak = _check_in_child(path)
    assert rc == 2, (rc, err)
    assert len(err.splitlines()) == 1 and err.startswith(f"mining landmarks: error: refusing to load {path}:"), err
    assert "which a landmark file never holds" in err
    assert 0 < peak < 300, f"{attack}: peak {peak} MB"


def test_a_file_larger_than_any_gnd_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from mining.datasets import gndfile

    data = _gnd([0, 1])
    data["imlist"] = [f"img_{i:07d}" for i in range(60_000)]  # a real, valid gnd of about 1 MB
    path = tmp_path / "gnd_big.pkl"
    path.write_bytes(pickle.dumps(data, protocol=4))
    assert len(load_landmarks(path).imlist) == 60_000
    monkeypatch.setattr(gndfile, "MAX_FILE_BYTES", 512 << 10)
    with pytest.raises(UserError, match=r"refusing to load .*gnd_big\.pkl: \d+ bytes, more than a landmark file holds"):
        load_landmarks(path)


def test_real_numpy_gnds_still_load_with_every_dtype_they_use(tmp_path):
    gnd = {"imlist": np.array(["a", "bb", "ccc"]).tolist(), "qimlist": ["q_1"],
           "gnd": [{"bbx": np.array([1.0, 2.0, 3.0, 4.0], ">f8"), "easy": np.array([0, 2], np.uint16),
                    "hard": np.array([1], np.int32), "junk": np.array([], np.int64),
                    "names": np.array(["x", "yy"]), "obj": np.array([1, "a"], object),
                    "grid": np.arange(6, dtype=np.float32).reshape(2, 3), "flag": np.bool_(True)}]}
    for protocol in (2, 4, 5):
        path = tmp_path / f"gnd_p{protocol}.pkl"
        path.write_bytes(pickle.dumps(gnd, protocol=protocol))
        g, want = load_landmarks(path).gnd[0], pickle.loads(path.read_bytes())["gnd"][0]  # as numpy reads it
        for key, value in want.items():
            assert type(g[key]) is type(value) and g[key].dtype == value.dtype, key
            assert np.asarray(g[key]).tolist() == np.asarray(value).tolist(), key


# ---- item 9: image names stay inside jpg/ ------------------------------------------------------


@pytest.mark.parametrize("key,name", [("qimlist", "../secret"), ("imlist", "../../etc/secret"),
                                      ("imlist", "/etc/secret"), ("qimlist", "sub/../../secret"),
                                      ("imlist", "a\\..\\..\\secret"), ("qimlist", "./q")])
def test_image_names_outside_jpg_are_refused_at_load(tmp_path, capsys, key, name):
    root = tmp_path / "lm"
    (root / "jpg").mkdir(parents=True)
    # the file the name reaches really exists: the check used to find it and pass
    Image.new("RGB", (40, 30)).save(tmp_path / "secret.jpg")
    data = {"imlist": ["a", "b"], "qimlist": ["q"], "gnd": [{"bbx": [0, 0, 5, 5], "easy": [0], "hard": [1]}]}
    data[key] = [name] + data[key][1:]
    for n in data["imlist"] + data["qimlist"]:
        if ".." not in n and not n.startswith(("/", ".")):
            Image.new("RGB", (40, 30)).save(root / "jpg" / f"{n}.jpg")
    path = root / "gnd_x.pkl"
    path.write_bytes(pickle.dumps(data, protocol=4))
    with pytest.raises(UserError) as err:
        load_landmarks(path)
    assert f"{key}[0] must name an image inside the dataset's jpg/ folder" in str(err.value)
    assert repr(name) in str(err.value)
    assert [(p.level, p.key) for p in check_dataset(path).errors] == [("error", key)]
    assert main(["landmarks", "check", str(path)]) == 2
    out = capsys.readouterr()
    assert "must name an image inside the dataset's jpg/ folder" in out.out + out.err


def test_names_with_subfolders_inside_jpg_still_load(tmp_path):
    data = {"imlist": ["x/a", "x/y/b"], "qimlist": ["q..1"],
            "gnd": [{"bbx": [0, 0, 5, 5], "easy": [0], "hard": [1]}]}
    path = tmp_path / "gnd_x.pkl"
    path.write_bytes(pickle.dumps(data, protocol=4))
    assert load_landmarks(path).imlist == ["x/a", "x/y/b"]

