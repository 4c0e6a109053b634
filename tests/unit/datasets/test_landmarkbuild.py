"""`mining landmarks build`: a CSV table of annotations → a revisitop gnd with its jpg/, which
`mining landmarks check` passes; every bad row one line naming the file and line, nothing written."""

from __future__ import annotations

import json
import pickle

import pytest
from PIL import Image

from mining.cli import main
from mining.datasets.gndfile import read_gnd
from mining.datasets.landmarks import load_landmarks

HEADER = "image,landmark,role,query,x1,y1,x2,y2"
# a small city: two landmarks (colosseum with two queries, trevi with one), positives per
# landmark and one per-query label, and two negatives
ROWS = [
    "q/colosseum_1.jpg,colosseum,query,,10,5,50,35",
    "q/colosseum_2.jpg,colosseum,query,,0,0,64,48",
    "q/trevi_1.jpg,trevi,query,,2,3,30,40",
    "db/c_a.jpg,colosseum,easy,,,,,",
    "db/c_b.jpg,colosseum,hard,,,,,",
    "db/c_c.jpg,colosseum,junk,,,,,",
    "db/c_b.jpg,colosseum,easy,q/colosseum_2.jpg,,,,",  # a clearer view for query 2: easy there
    "db/c_d.jpg,colosseum,hard,colosseum_1,,,,",          # one query only, named by its stem
    "db/t_a.jpg,trevi,easy,,,,,",
    "db/t_b.jpg,trevi,hard,,,,,",
    "db/street.jpg,,negative,,,,,",
    "db/park.jpg,,negative,,,,,",
]
EXPECTED = {
    # database sorted by name: c_a c_b c_c c_d park street t_a t_b → 0..7
    "imlist": ["c_a", "c_b", "c_c", "c_d", "park", "street", "t_a", "t_b"],
    "qimlist": ["colosseum_1", "colosseum_2", "trevi_1"],
    "gnd": [
        {"bbx": [10.0, 5.0, 50.0, 35.0], "easy": [0], "hard": [1, 3], "junk": [2], "landmark": "colosseum"},
        {"bbx": [0.0, 0.0, 64.0, 48.0], "easy": [0, 1], "hard": [], "junk": [2], "landmark": "colosseum"},
        {"bbx": [2.0, 3.0, 30.0, 40.0], "easy": [6], "hard": [7], "junk": [], "landmark": "trevi"},
    ],
}


def jpeg(path, size=(64, 48), colour=(120, 90, 60), fmt="JPEG", orientation=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    kw = {}
    if orientation:
        exif = Image.Exif()
        exif[0x0112] = orientation
        kw["exif"] = exif
    Image.new("RGB", size, colour).save(path, fmt, **kw)


def city(tmp_path, rows=ROWS, header=HEADER):
    src = tmp_path / "src"
    for k, row in enumerate(rows):
        image = row.split(",")[0]
        if image and "nowhere" not in image and not (src / image).exists():
            jpeg(src / image, colour=(k * 20 % 256, 90, 60))
    (src / "annotations.csv").write_text("\n".join([header, *rows]) + "\n")
    return src / "annotations.csv"


def build(table, out, *extra):
    return main(["landmarks", "build", str(table), "--out", str(out), *extra])


def test_build_writes_the_gnd_the_table_says_and_check_passes(tmp_path, capsys):
    table = city(tmp_path)
    out = tmp_path / "data/rrome"
    assert build(table, out) == 0
    printed = capsys.readouterr().out
    assert "3 queries, 8 database images, 2 landmarks" in printed and "error" not in printed
    gnd = out / "gnd_rrome.pkl"  # the name: OUT's folder
    assert read_gnd(gnd) == EXPECTED
    for name in EXPECTED["imlist"] + EXPECTED["qimlist"]:  # copies, byte for byte
        src = next((tmp_path / "src").rglob(f"{name}.jpg"))
        assert (out / "jpg" / f"{name}.jpg").read_bytes() == src.read_bytes()
    assert main(["landmarks", "check", str(gnd), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["landmarks"] == [{"name": "colosseum", "queries": ["colosseum_1", "colosseum_2"]},
                                   {"name": "trevi", "queries": ["trevi_1"]}]
    assert [p for p in report["problems"] if p["level"] == "error"] == []
    ds = load_landmarks(gnd)
    assert ds.positives(0) == [0, 1, 3] and ds.query_landmark(2) == "trevi"
    # the same table again: the same bytes; a plain pickle of plain lists
    first = gnd.read_bytes()
    assert build(table, out) == 0 and gnd.read_bytes() == first
    assert pickle.loads(first) == EXPECTED


def test_the_box_is_in_pixels_of_the_image_as_shown(tmp_path, capsys):
    """A 64×48 JPEG with EXIF orientation 6 (turned a quarter) is shown 48×64: a box 40 high fits,
    one 60 wide does not."""
    src = tmp_path / "src"
    jpeg(src / "q.jpg", orientation=6)
    jpeg(src / "p.jpg")
    (src / "t.csv").write_text(f"{HEADER}\nq.jpg,tower,query,,0,0,48,60\np.jpg,tower,easy,,,,,\n")
    assert build(src / "t.csv", tmp_path / "out", "--name", "city") == 0
    (src / "t.csv").write_text(f"{HEADER}\nq.jpg,tower,query,,0,0,60,40\np.jpg,tower,easy,,,,,\n")
    assert build(src / "t.csv", tmp_path / "out2", "--name", "city") == 2
    assert "reaches outside the 48×64 image q.jpg" in capsys.readouterr().err


def _replace(rows, i, row):
    return [row if k == i else r for k, r in enumerate(rows)]


BAD = [
    # (what, rows, line, the message's words)
    ("missing image", _replace(ROWS, 3, "db/nowhere.jpg,colosseum,easy,,,,,"), 5, "image db/nowhere.jpg: not found"),
    ("box outside", _replace(ROWS, 0, "q/colosseum_1.jpg,colosseum,query,,10,5,70,35"), 2,
     "the box [10, 5, 70, 35] reaches outside the 64×48 image q/colosseum_1.jpg"),
    ("box upside down", _replace(ROWS, 0, "q/colosseum_1.jpg,colosseum,query,,50,5,10,35"), 2, "x1 < x2"),
    ("no box", _replace(ROWS, 0, "q/colosseum_1.jpg,colosseum,query,,,,,"), 2, "a query row needs its box"),
    ("box on a positive", _replace(ROWS, 3, "db/c_a.jpg,colosseum,easy,,1,1,5,5"), 5, "only a query row has a box"),
    ("unknown landmark", _replace(ROWS, 8, "db/t_a.jpg,trvi,easy,,,,,"), 10, "unknown landmark 'trvi'"),
    ("duplicate query", ROWS + ["q/colosseum_1.jpg,colosseum,query,,1,1,20,20"], 14,
     "duplicate query: q/colosseum_1.jpg is a query on line 2 already"),
    ("unknown query", _replace(ROWS, 7, "db/c_d.jpg,colosseum,hard,colosseum_9,,,,"), 9, "unknown query 'colosseum_9'"),
    ("another landmark's query", _replace(ROWS, 7, "db/c_d.jpg,trevi,hard,colosseum_1,,,,"), 9,
     "query 'colosseum_1' is of landmark 'colosseum', not 'trevi'"),
    ("labelled twice", ROWS + ["db/c_a.jpg,colosseum,hard,,,,,"], 14, "db/c_a.jpg is labelled for 'colosseum' on line 5"),
    ("negative with a landmark", _replace(ROWS, 10, "db/street.jpg,trevi,negative,,,,,"), 12, "a negative shows no landmark"),
    ("negative and positive", ROWS + ["db/c_a.jpg,,negative,,,,,"], 14, "db/c_a.jpg is a negative but line 5"),
    ("bad role", _replace(ROWS, 3, "db/c_a.jpg,colosseum,positive,,,,,"), 5, "role 'positive' is not one of"),
    ("one name, two files", ROWS + ["q/c_a.jpg,colosseum,easy,,,,,"], 14, "would both be jpg/c_a.jpg"),
    ("short row", ROWS + ["db/c_a.jpg,colosseum"], 14, "2 fields, the header has 8"),
]


@pytest.mark.parametrize("what,rows,line,words", BAD, ids=[b[0] for b in BAD])
def test_a_bad_row_is_one_line_naming_file_and_line_and_nothing_is_written(tmp_path, capsys, what, rows, line, words):
    table = city(tmp_path, rows)
    out = tmp_path / "out"
    assert build(table, out, "--name", "rrome") == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert f"{table} line {line}: " in err and words in err, err
    assert not out.exists()


def test_table_level_errors(tmp_path, capsys):
    src = tmp_path / "src"
    jpeg(src / "a.jpg")
    cases = [("image,landmark,role,bbx\n", "line 1: unknown column 'bbx'"),
             ("image,role\n", "line 1: no column 'landmark'"),
             (f"{HEADER}\na.jpg,,negative,,,,,\n", "no query rows"),
             ("", "empty")]
    for text, words in cases:
        (src / "t.csv").write_text(text)
        assert build(src / "t.csv", tmp_path / "out", "--name", "x") == 2
        assert words in capsys.readouterr().err
    (src / "b.png").parent.mkdir(exist_ok=True)
    jpeg(src / "b.png", fmt="PNG")
    (src / "t.csv").write_text(f"{HEADER}\nb.png,tower,query,,0,0,5,5\n")
    assert build(src / "t.csv", tmp_path / "out", "--name", "x") == 2
    assert "a PNG file, not a JPEG" in capsys.readouterr().err
    (src / "t.csv").write_text(f"{HEADER}\na.jpg,tower,query,,0,0,5,5\n")
    assert build(src / "t.csv", tmp_path / "out", "--name", "no/slash") == 2
    assert "benchmark name 'no/slash'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
