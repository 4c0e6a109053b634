"""The one strict YAML reader (manifests, SLURM cluster file): no aliases, no duplicate keys."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from mining.settings import manifest
from mining.compute.cluster import make_client
from mining.errors import UserError
from mining.files.yamlfile import read_yaml

from paths import ROOT as REPO


def _bomb(levels: int = 9) -> str:
    """"Billion laughs": each level is 9 aliases of the one before, 9**levels strings in all."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_fails_fast_in_little_memory(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    # a real manifest head so that the bomb reaches the loader as a manifest would
    bomb.write_text("name: x\nresults: results/x\n" + _bomb())
    assert bomb.stat().st_size < 1100
    probe = textwrap.dedent(f"""
        import json, resource, time
        from mining.settings import manifest
        from mining.stages.geofilter import stage
        from mining.errors import UserError
        import jsonschema, mining.stages.geofilter.countries
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        try:
            manifest.load({str(bomb)!r})
            msg = None
        except UserError as exc:
            msg = str(exc)
        seconds = time.perf_counter() - t0
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(json.dumps({{"msg": msg, "seconds": seconds, "grown_kb": grown}}))
    """)
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["msg"] is not None and f"{bomb} line 3" in out["msg"] and "alias" in out["msg"], out
    assert out["seconds"] < 1.0, out
    assert out["grown_kb"] < 100 * 1024, out  # peak RSS growth while loading (imports done before)


@pytest.mark.parametrize("text, needle", [
    ("a: &x 1\nb: *x\n", "line 1: anchor &x"),
    ("a: 1\nb: [1, *x]\n", "line 2"),  # an undefined alias is refused the same way
    ("base: &b {n: 1}\nother:\n  <<: *b\n", "line 1: anchor &b"),
    ("a: !!python/object:os.system {}\n", "line 1: not valid YAML"),
])
def test_aliases_anchors_merges_and_tags_are_refused(tmp_path, text, needle):
    p = tmp_path / "m.yaml"
    p.write_text(text)
    with pytest.raises(UserError) as exc:
        read_yaml(p)
    assert f"{p} {needle}" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_duplicate_key_names_file_line_and_key(tmp_path):
    text = (REPO / "manifests" / "demo.yaml").read_text().replace("select:\n", "select:\n  n: 5\n")
    p = tmp_path / "dup.yaml"
    p.write_text(text)
    line = text.splitlines().index("  n: 5") + 2  # the second n
    with pytest.raises(UserError) as exc:
        manifest.load(p)
    assert str(exc.value) == f"manifest {p} line {line}: duplicate key select.n (first at line {line - 1})"
    p.write_text("name: a\nresults: r\nname: b\n")
    with pytest.raises(UserError, match=r"line 3: duplicate key name \(first at line 1\)"):
        manifest.load(p)


def test_lines_are_indexed_once_per_key(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("a:\n  b: [1, 2]\n  c: {d: x}\n")
    doc, lines = read_yaml(p)
    assert doc == {"a": {"b": [1, 2], "c": {"d": "x"}}}
    assert lines == {("a",): 1, ("a", "b"): 2, ("a", "b", 0): 2, ("a", "b", 1): 2, ("a", "c"): 3, ("a", "c", "d"): 3}


def test_slurm_config_goes_through_the_same_reader(tmp_path):
    p = tmp_path / "slurm.yaml"
    p.write_text("cores: 4\nmemory: 8GB\njobs: 2\ncores: 8\n")
    with pytest.raises(UserError, match=r"SLURM config .*slurm.yaml line 4: duplicate key cores"):
        make_client(slurm=str(p))
    p.write_text(_bomb())
    with pytest.raises(UserError, match=r"SLURM config .*line 1: anchor"):
        make_client(slurm=str(p))
