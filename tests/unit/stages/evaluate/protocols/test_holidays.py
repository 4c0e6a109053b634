"""INRIA Holidays (protocols/holidays.py): the query takes no rank, a missing query is refused."""

import pytest

from mining.errors import UserError
from mining.stages.evaluate.protocols.holidays import holidays_groups, holidays_map, read_holidays_results


def test_holidays_query_ignored_and_missing_query_refused(tmp_path):
    groups = holidays_groups(["100000.jpg", "100001.jpg", "100002.jpg", "100100.jpg", "100101.jpg"])
    assert groups == {"100000.jpg": ["100001.jpg", "100002.jpg"], "100100.jpg": ["100101.jpg"]}
    (tmp_path / "res.txt").write_text("100000.jpg 0 100000.jpg 1 100001.jpg 2 100100.jpg 3 100002.jpg\n"
                                      "100100.jpg 1 100101.jpg 0 100000.jpg\n")
    res = read_holidays_results(tmp_path / "res.txt")
    # q1 without itself: 100001 at 0, 100002 at 2 → (1 + 1)/4 + (1/2 + 2/3)/4; q2: at rank 1 → 1/4
    assert holidays_map(res, groups) == pytest.approx(((0.5 + (0.5 + 2 / 3) / 4) + 0.25) / 2)
    with pytest.raises(UserError, match="omit"):
        holidays_map({"100000.jpg": []}, groups)
