"""The original Oxford protocol (protocols/oxford.py) on the real Oxford 5k ground truth: set semantics,
junk deleted from the ranking, a bad query file refused."""

from fractions import Fraction as F

import pytest

from mining.errors import UserError
from mining.stages.evaluate.protocols.oxford import load_oxford_gt, oxford_gnd, oxford_map

from paths import OXFORD


def test_loads_all_55_real_oxford_queries_with_set_semantics():
    qs = load_oxford_gt(OXFORD)
    assert len(qs) == 55 and len({q.name for q in qs}) == 55
    q = next(q for q in qs if q.name == "all_souls_1")
    assert q.image == "all_souls_000013" and q.bbox == (136.5, 34.1, 648.5, 955.7)
    raw = (OXFORD / "all_souls_1_good.txt").read_text().split()
    assert len(raw) > len(set(raw)) and q.good == frozenset(raw)  # a duplicate line counts once
    assert all(q.positives and not (q.positives & q.junk) for q in qs)
    imlist = sorted(set().union(*(q.positives | q.junk for q in qs)))
    gnd = oxford_gnd(qs, imlist)
    assert all(g["ok"].size == len(q.positives) for g, q in zip(gnd, qs))
    # a perfect ranking (positives first) scores 1 for every query; reversed scores less
    ranked = {q.name: sorted(q.positives) + sorted(set(imlist) - q.positives) for q in qs}
    assert oxford_map(qs, ranked)[0] == pytest.approx(1.0)
    worst = {q.name: sorted(set(imlist) - q.positives - q.junk) + sorted(q.positives) for q in qs}
    assert oxford_map(qs, worst)[0] < 0.5
    with pytest.raises(UserError, match="omit"):
        oxford_map(qs, {qs[0].name: []})


def test_oxford_junk_is_deleted_and_bad_query_file_refused(tmp_path):
    for kind, names in (("good", "a\na\n"), ("ok", "b\n"), ("junk", "j\n")):
        (tmp_path / f"x_1_{kind}.txt").write_text(names)
    (tmp_path / "x_1_query.txt").write_text("oxc1_x_000001 1 2 3.5 4\n")
    qs = load_oxford_gt(tmp_path)
    m, aps = oxford_map(qs, {"x_1": ["j", "n", "a", "b"]})
    # j deleted: a at 1, b at 2 of n = 2 → (0/1 + 1/2)/4 + (1/2 + 2/3)/4
    assert m == pytest.approx(float((F(0, 1) + F(1, 2)) / 4 + (F(1, 2) + F(2, 3)) / 4))
    (tmp_path / "x_1_query.txt").write_text("oxc1_x_000001 1 2\n")
    with pytest.raises(UserError, match="x1 y1 x2 y2"):
        load_oxford_gt(tmp_path)
