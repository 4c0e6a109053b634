"""The revisited setups (protocols/setups.py): easy, medium and hard from one gnd."""

import pytest

from mining.errors import UserError
from mining.stages.evaluate.protocols.setups import setup_gnd


def test_revisited_setups():
    g = [{"easy": [1, 2], "hard": [3], "junk": [4]}]
    e, m, h = (setup_gnd(g, s)[0] for s in ("easy", "medium", "hard"))
    assert e["ok"].tolist() == [1, 2] and e["junk"].tolist() == [3, 4]
    assert m["ok"].tolist() == [1, 2, 3] and m["junk"].tolist() == [4]
    assert h["ok"].tolist() == [3] and h["junk"].tolist() == [1, 2, 4]
    with pytest.raises(UserError):
        setup_gnd(g, "extreme")
