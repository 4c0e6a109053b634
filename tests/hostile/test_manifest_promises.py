"""What a manifest promises:

- its values reach a command line as values, never as flags: `release.licenses: [by,
  "--no-blur-faces"]` used to turn face blurring off. Licence lists are codes (the schema), and the
  rules pass the manifest itself (`--manifest`), never its values: each stage reads its section;
- it is complete before anything runs: `metadata` (unless demo), and every input file it names
  (metadata, places, hashes, landmark ground truths, GeoJSON areas, local download folders)
  readable at load, one line naming the key and its line — not a KeyError in the Snakefile or a
  failure at geofilter after the ingest ran.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from snakerun import REPO, snakemake

from mining.settings import manifest, options
from mining.cli import build_parser
from mining.errors import UserError
from mining.publishing.licences import OPEN

DEMO = REPO / "manifests" / "demo.yaml"
R1M = REPO / "manifests" / "r1m.yaml"


def _write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _demo(**edits) -> dict:
    m = yaml.safe_load(DEMO.read_text())
    m["demo"]["preset"] = "micro"
    for key, value in edits.items():
        m.setdefault(key, {}).update(value) if isinstance(value, dict) else m.update({key: value})
    return m


# ---- item 8: values, never flags -------------------------------------------------------------


@pytest.mark.parametrize("licences", [["by", "--no-blur-faces"], ["--no-blur-faces"], ["by", "Attribution License"],
                                      ["by", "http://creativecommons.org/licenses/by/2.0/"], ["by", "all"]])
def test_licence_lists_are_known_codes_only(tmp_path, licences):
    path = _write(tmp_path / "m.yaml", _demo(release={"licenses": licences}))
    with pytest.raises(UserError) as err:
        manifest.load(path)
    assert ": release.licenses" in str(err.value) and "licence codes" in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_every_known_code_is_accepted_and_the_schema_lists_exactly_them(tmp_path):
    listed = manifest.schema()["properties"]["release"]["properties"]["licenses"]["oneOf"][1]["items"]["enum"]
    assert sorted(listed) == sorted(OPEN)
    m = manifest.load(_write(tmp_path / "m.yaml", _demo(release={"licenses": list(OPEN)})))
    assert m.release["licenses"] == list(OPEN)


def test_a_licence_value_that_looks_like_a_flag_stays_a_value():
    """How the workflow passes licences: `--licenses=L`, one word each."""
    args = build_parser().parse_args(["release", "--selected", "s", "--images", "i", "--out", "o",
                                      "--licenses=by", "--licenses=--no-blur-faces"])
    assert args.licenses == ["by", "--no-blur-faces"] and options.from_args(args, "release").blur_faces is True
    args = build_parser().parse_args(["release", "--selected", "s", "--images", "i", "--out", "o"])
    assert args.licenses is None  # run() reads that as `all`
    args = build_parser().parse_args(["release", "--selected", "s", "--images", "i", "--out", "o", "--licenses", "by",
                                      "by-sa"])
    assert args.licenses == ["by", "by-sa"]  # the spelling by hand still works


def _mining_args(cmd: str) -> list[list[str]]:
    """Each `mining ...` invocation of a shell command line, as argv (up to a redirection or &&)."""
    out, words = [], shlex.split(cmd)
    for i, w in enumerate(words):
        if w == "mining" and i + 1 < len(words) and not words[i + 1].startswith("-"):
            argv = []
            for x in words[i + 1:]:
                if x in (">", "2>&1", "&&", "|", ";") or x.startswith(">"):
                    break
                argv.append(x)
            out.append(argv)
    return out


def test_the_workflow_passes_manifest_values_as_values(tmp_path):
    """A dry run of every rule (demo world, micro): each `mining` command line parses with
    mining's own parser into the manifest's values (read from the manifest it names); the
    release keeps blurring on."""
    m = _demo(release={"licenses": ["by", "by-sa"], "face_threshold": 0.8, "min_face_px": 20},
              evaluate={"random_seeds": [3, 4]}, select={"near_duplicates": "keep"})
    r = snakemake(tmp_path, "-n", "-p", "--cores", "2", "--forceall", manifest=_write(tmp_path / "m.yaml", m))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    shells = [line.removeprefix("Shell command: ") for line in r.stdout.splitlines()
              if line.startswith("Shell command:") and line != "Shell command: None"]
    parsed = {}
    for cmd in shells:
        for argv in _mining_args(cmd):
            if argv[:1] == ["demo"] and argv[1:2] == ["serve"]:
                continue
            parsed.setdefault(argv[0], build_parser().parse_args(argv))
    rel = options.from_args(parsed["release"], "release")
    assert rel.licenses == ["by", "by-sa"] and rel.blur_faces is True
    assert (rel.face_threshold, rel.min_face_px) == (0.8, 20)
    assert options.from_args(parsed["evaluate"], "evaluate").random_seeds == [3, 4]
    assert options.from_args(parsed["select"], "select").near_duplicates == "keep"
    assert "by-sa" not in shlex.split(next(c for c in shells if "mining release" in c))  # no value on the line


# ---- item 10: complete before anything runs --------------------------------------------------


@pytest.fixture
def real(tmp_path, monkeypatch):
    """r1m.yaml with its inputs present (empty stand-ins) in a working directory of its own."""
    monkeypatch.chdir(tmp_path)
    m = yaml.safe_load(R1M.read_text())
    for p in m["metadata"] + [b["gnd"] for b in m["landmarks"]]:
        Path(p).parent.mkdir(parents=True, exist_ok=True)
        Path(p).write_bytes(b"x")
    assert manifest.load(_write(tmp_path / "ok.yaml", m), inputs=True)["name"] == "r1m"
    return m


def test_a_real_run_without_metadata_is_refused_naming_the_key(tmp_path, real):
    del real["metadata"]
    with pytest.raises(UserError) as err:
        manifest.load(_write(tmp_path / "m.yaml", real))
    assert str(err.value).startswith(f"manifest {tmp_path / 'm.yaml'}: metadata: required"), str(err.value)
    manifest.load(_write(tmp_path / "demo.yaml", _demo()))  # a demo run has none


@pytest.mark.parametrize("edit,key,says", [
    (lambda m: m["metadata"].__setitem__(3, "data/yfcc100m/typo-3.bz2"), "metadata[3]", "file not found"),
    (lambda m: m.update(places="data/yfcc100m/places.bz2"), "places", "file not found"),
    (lambda m: m.update(hashes="data/yfcc100m"), "hashes", "not a file"),
    (lambda m: m["landmarks"][1].update(gnd="data/rparis6k/gnd_rparis.pkl"), "landmarks[1].gnd", "file not found"),
    (lambda m: m["download"].update(sources=[{"kind": "local", "path": "data/nowhere"}]),
     "download.sources[0].path", "folder not found"),
    (lambda m: m["geofilter"]["areas"].append({"name": "pw", "geojson": "/etc/passwd"}),
     "geofilter.areas[1].geojson", "cannot read GeoJSON /etc/passwd"),
    (lambda m: m.update(methods=[*m["methods"], "onnx-global"]) or m.setdefault("describe", {}).setdefault("params", {}).update(
        {"onnx-global": {"model": "models/dino.onnx"}}), "describe.params.onnx-global.model",
     "file not found: models/dino.onnx"),
    (lambda m: m.setdefault("describe", {}).setdefault("params", {}).update({"cnn-gem": {"model_file": "models"}}),
     "describe.params.cnn-gem.model_file", "not a file: models"),
], ids=["metadata", "places", "hashes", "gnd", "local-source", "geojson", "onnx-model", "torchscript-model"])
def test_every_input_the_manifest_names_is_checked_at_load(tmp_path, real, edit, key, says):
    (tmp_path / "models").mkdir()  # a method's model file (onnx-global's, cnn-gem's): not found, or a folder
    edit(real)
    path = _write(tmp_path / "m.yaml", real)
    with pytest.raises(UserError) as err:
        manifest.load(path, inputs=True)
    msg = str(err.value)
    assert msg.startswith(f"manifest {path} line ") and f": {key}: {says}" in msg, msg
    assert "\n" not in msg


def test_the_workflow_stops_on_a_missing_input_before_anything_runs(tmp_path, real):
    real["metadata"][0] = "data/yfcc100m/gone.bz2"
    r = snakemake(tmp_path, "-n", "--cores", "1", manifest=_write(tmp_path / "m.yaml", real))
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert ": metadata[0]: file not found: data/yfcc100m/gone.bz2" in out, out[-2000:]
    assert "Traceback" not in out and "KeyError" not in out
    assert not (tmp_path / "results").exists()
    del real["metadata"]
    r = snakemake(tmp_path, "-n", "--cores", "1", manifest=_write(tmp_path / "m.yaml", real))
    assert r.returncode != 0 and ": metadata: required" in r.stdout + r.stderr
    assert "KeyError" not in r.stdout + r.stderr


