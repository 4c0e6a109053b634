"""The README's new-city path on real (generated) ground truth: a revisitop gnd written out as
the annotation table, `mining landmarks build` gives it back, and the README's manifest takes it.
Uses the shared demo run's world (tests/conftest.py), no run of its own."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from mining.cli import main
from mining.datasets.gndfile import read_gnd
from mining.datasets.landmarks import load_landmarks

from paths import ROOT as REPO


def as_table(gnd_path: Path, table: Path) -> None:
    """The table a person would write for this ground truth: labels shared by all of a landmark's
    queries once per landmark, the others per query; database images in no label as negatives."""
    ds = load_landmarks(gnd_path)
    rows = []
    for i, q in enumerate(ds.qimlist):
        rows.append([f"jpg/{q}.jpg", ds.query_landmark(i), "query", "", *(f"{v:g}" for v in ds.bbox(i))])
    labelled = set()
    for lm, qs in ds.groups:
        for label in ("easy", "hard", "junk"):
            sets = [set(ds.gnd[i].get(label, [])) for i in qs]
            shared = set.intersection(*sets)
            rows += [[f"jpg/{ds.imlist[j]}.jpg", lm, label, "", "", "", "", ""] for j in sorted(shared)]
            for i, s in zip(qs, sets):
                rows += [[f"jpg/{ds.imlist[j]}.jpg", lm, label, ds.qimlist[i], "", "", "", ""] for j in sorted(s - shared)]
            labelled |= set().union(*sets)
    rows += [[f"jpg/{n}.jpg", "", "negative", "", "", "", "", ""] for j, n in enumerate(ds.imlist) if j not in labelled]
    with open(table, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image", "landmark", "role", "query", "x1", "y1", "x2", "y2"])
        w.writerows(rows)


def test_the_demo_ground_truth_through_a_table_and_build_is_itself(demo_run, tmp_path, capsys):
    world_gnd = next((demo_run / "results/demo/world").rglob("gnd_*.pkl"))
    table = tmp_path / "annotations.csv"
    as_table(world_gnd, table)
    out = tmp_path / "data/demo"
    assert main(["landmarks", "build", str(table), "--out", str(out), "--images", str(world_gnd.parent)]) == 0
    built, original = read_gnd(out / "gnd_demo.pkl"), read_gnd(world_gnd)
    assert built["qimlist"] == original["qimlist"]
    assert built["imlist"] == sorted(original["imlist"])  # the demo's database is sorted already
    keys = ("easy", "hard", "junk", "landmark")
    assert [{k: g[k] for k in keys} | {"bbx": [float(v) for v in g["bbx"]]} for g in built["gnd"]] == \
           [{k: g[k] for k in keys} | {"bbx": [float(v) for v in g["bbx"]]} for g in original["gnd"]]
    assert load_landmarks(out / "gnd_demo.pkl").fingerprint() == load_landmarks(world_gnd).fingerprint()
    assert main(["landmarks", "check", str(out / "gnd_demo.pkl")]) == 0
    assert "error" not in capsys.readouterr().out


def test_the_readmes_manifest_takes_a_built_ground_truth(tmp_path):
    """The README's example manifest, with its paths made real here, passes the workflow's own
    check (schema, methods, geofilter, every input readable)."""
    from mining.settings import manifest

    readme = (REPO / "README.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "name: rrome" in b)
    (tmp_path / "data/yfcc100m").mkdir(parents=True)
    (tmp_path / "data/yfcc100m/yfcc100m_dataset.sql").write_bytes(b"SQLite format 3\0")
    (tmp_path / "data/rrome/jpg").mkdir(parents=True)
    (tmp_path / "data/rrome/gnd_rrome.pkl").write_bytes(b"")
    (tmp_path / "images").mkdir()
    text = block.replace("/data/yfcc100m-images", str(tmp_path / "images"))
    text = re.sub(r"(?m)^(metadata: \[)data/", rf"\g<1>{tmp_path}/data/", text)
    text = re.sub(r"(?m)^(landmarks: )data/", rf"\g<1>{tmp_path}/data/", text)
    (tmp_path / "rrome.yaml").write_text(text)
    m = manifest.load(tmp_path / "rrome.yaml", inputs=True)
    assert m["landmarks"] == f"{tmp_path}/data/rrome/gnd_rrome.pkl" and m["name"] == "rrome"
