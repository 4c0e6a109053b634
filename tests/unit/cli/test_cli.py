"""The shared foundation: CLI dispatch, atomic writes, image layout, landmark loading."""

import pickle
import subprocess
import sys

import pytest

from mining.files import atomic
from mining.settings import layout
from mining.cli import main
from mining.stages import names as stage_names
from mining.errors import UserError
from mining.datasets.landmarks import load_landmarks
from paths import ROOT


def test_help_lists_every_stage(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for stage in stage_names():
        assert stage in out


def test_console_script_runs():
    r = subprocess.run([sys.executable, "-m", "mining", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and "mining" in r.stdout


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic.atomic_path(target) as tmp:
            tmp.write_text("partial")
            raise RuntimeError("crash")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []
    atomic.write_text(target, "done")
    assert target.read_text() == "done"


def test_image_layout_is_stable_and_r1m_shaped():
    p = layout.image_relpath(123456789)
    key = layout.image_key(123456789)
    assert p == f"jpg/{key[:3]}/{key}.jpg"
    assert len(key) == 32 and layout.image_key(123456789) == key
    assert layout.image_key(1) != layout.image_key(2)


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


def test_atomic_files_get_normal_permissions(tmp_path):
    import os
    import stat

    target = tmp_path / "perm.txt"
    atomic.write_text(target, "x")
    mode = stat.S_IMODE(os.stat(target).st_mode)
    assert mode & 0o044, oct(mode)  # readable by group/others (umask permitting), not mkstemp's 0600


def test_arguments_after_double_dash_pass_through(monkeypatch):
    import argparse

    from mining import cli

    seen = {}

    def fake_register(sub):
        p = sub.add_parser("demo")
        p.set_defaults(func=lambda a: seen.update(tail=a.passthrough) or 0)

    monkeypatch.setattr(cli.stages, "names", lambda: ["demo"])
    monkeypatch.setattr(cli.importlib, "import_module", lambda name: argparse.Namespace(register=fake_register))
    assert cli.main(["demo", "--", "mining", "download", "--host", "{host}"]) == 0
    assert seen["tail"] == ["mining", "download", "--host", "{host}"]


def test_fp16_rows_decode_bit_exactly():
    import numpy as np

    from mining.retrieval.descriptors import as_float32

    rng = np.random.default_rng(0)
    a = rng.standard_normal((257, 96)).astype(np.float16)
    a[0, :5] = [0.0, -0.0, 6e-8, np.inf, 65504]  # zeros, a subnormal, inf, max
    out = as_float32(a)
    assert out.dtype == np.float32
    assert np.array_equal(out.view(np.uint32), a.astype(np.float32).view(np.uint32))
    assert as_float32(np.zeros((0, 8), np.float16)).shape == (0, 8)
    every = np.arange(2**16, dtype=np.uint16).view(np.float16).reshape(256, 256)  # every half value
    got, want = as_float32(every), every.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32)) and np.isnan(got[nan]).all()


def test_progress_goes_to_a_log_as_whole_lines(monkeypatch):
    import io

    from mining.console.progress import bar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("MINING_PROGRESS_SECONDS", "0")
    log, tty = io.StringIO(), Terminal()
    for stream in (log, tty):
        b = bar(total=5, desc="work", unit="img", stream=stream)
        for _ in range(5):
            b.update(1)
        b.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and len(lines) >= 2
    assert all(line.startswith("work:") for line in lines) and "5/5" in lines[-1]
    assert "\r" in tty.getvalue()  # a terminal keeps tqdm's redraw in place
    quiet = io.StringIO()
    b = bar(total=2, desc="x", stream=quiet, disable=True)
    b.update(2)
    b.close()
    assert quiet.getvalue() == ""


def test_kernels_work_without_a_writable_numba_cache(tmp_path):
    """A read-only install with a read-only HOME leaves numba no cache location; it would
    refuse `cache=True` at import. The kernels compile per run instead."""
    import os

    (tmp_path / "nowhere.py").write_text(
        "from numba.core.caching import InTreeCacheLocator\n"
        "class Nowhere(InTreeCacheLocator):\n"
        "    @classmethod\n"
        "    def from_function(cls, py_func, py_file):\n"
        "        return None\n")
    code = ("import numpy as np\n"
            "from mining.retrieval.descriptors import as_float32\n"
            "from mining.stages.score import PositiveCounter\n"
            "assert as_float32(np.array([[1.5, -2]], np.float16)).tolist() == [[1.5, -2.0]]\n"
            "c = PositiveCounter.build(np.array([0.1, 0.5], np.float32))\n"
            "print(c.count_doubled(np.array([0.0, 0.3, 0.5, 0.9], np.float32)).tolist())\n")
    env = {**os.environ, "NUMBA_CACHE_LOCATOR_CLASSES": "nowhere.Nowhere",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[0, 2, 3, 4]"


def _verb_parsers() -> dict:
    import argparse

    from mining.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_one_cli_convention_across_verbs():
    """A progress bar is turned off with --no-progress on every verb that has one (no other
    spelling), every input from an earlier stage is a flag (no hidden positional), and every
    verb that reads landmark datasets takes the one `--landmarks [NAME=]GND` flag."""
    verbs = _verb_parsers()
    with_progress = {name for name, p in verbs.items() if any("--no-progress" in a.option_strings for a in p._actions)}
    assert {"ingest", "geofilter", "score", "evaluate", "neardup", "release"} <= with_progress
    for name in with_progress:
        action = next(a for a in verbs[name]._actions if "--no-progress" in a.option_strings)
        assert action.option_strings == ["--no-progress"] and action.dest == "no_progress", name
    # no verb takes a positional input except raw files (ingest) and sub-verbs, shown or hidden
    for name, p in verbs.items():
        positional = [a.dest for a in p._actions if not a.option_strings and
                      not a.__class__.__name__.startswith("_SubParsers")]
        assert positional in ([], ["paths"]), (name, positional)
    serve = next(a for a in verbs["review"]._actions if a.__class__.__name__.startswith("_SubParsers")).choices["serve"]
    parsers = [*verbs.values(), serve]
    landmarks = [a for p in parsers for a in p._actions if "--landmarks" in a.option_strings and a.nargs == "+"]
    assert len(landmarks) == 6  # report's --landmarks is one file: its query crops
    assert len({(a.nargs, a.metavar, a.help.split("; ")[1]) for a in landmarks}) == 1


@pytest.mark.parametrize("verb,name", [("geofilter", "metadata"), ("select", "scores"), ("release", "selected")])
def test_a_main_input_is_a_required_flag(verb, name, capsys):
    p = _verb_parsers()[verb]
    required = {"geofilter": ["--manifest", "m", "--out", "o"], "select": ["--decisions", "d", "--candidates", "c", "--out", "o"],
                "release": ["--images", "i", "--out", "o"]}[verb]
    assert str(getattr(p.parse_args([f"--{name}", "X", *required]), name)) == "X"
    for argv in (["X", *required], required):  # a bare path is refused, as is no input
        with pytest.raises(SystemExit):
            p.parse_args(argv)
    assert f"--{name}" in capsys.readouterr().err


def test_a_json_input_missing_or_broken_is_one_line_naming_it(tmp_path):
    from mining.files.tables import read_json

    plan = tmp_path / "plan.json"
    with pytest.raises(UserError, match=r"^audit plan .*plan\.json not found \(make it with `mining audit draw`\)$"):
        read_json(plan, "audit plan", hint="make it with `mining audit draw`")
    plan.write_text('{"sample": [1, 2')
    with pytest.raises(UserError, match=r"plan\.json: not JSON \("):
        read_json(plan, "audit plan")
    plan.write_text('{"sample": [1, 2]}')
    assert read_json(plan, "audit plan") == {"sample": [1, 2]}
