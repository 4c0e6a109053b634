"""The gnd structure checked on every load (`mining.datasets.gndcheck`): a broken landmark file is
refused with its file, query and key named, by every stage and by `mining landmarks check`."""

from __future__ import annotations

import json

import pytest
from gnd_files import small_gnd, write_gnd

from mining.cli import main
from mining.errors import UserError
from mining.datasets.landmarks import load_landmarks


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
