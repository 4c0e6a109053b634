"""UKBench (protocols/ukbench.py): the 4-score counts."""

import pytest

from mining.errors import UserError
from mining.stages.evaluate.protocols.ukbench import ukbench_counts, ukbench_objects


def test_ukbench_counts():
    top = [[0, 1, 2, 3], [1, 0, 5, 6], [2, 4, 5, 6], [3, 7, 1, 0], [4, 5, 6, 7], [5, 4, 7, 6], [6, 0, 1, 2], [7, 6, 3, 5]]
    names = [f"ukbench{i:05d}.jpg" for i in range(8)]
    obj = ukbench_objects(names)
    results = {names[q]: [names[i] for i in row] for q, row in enumerate(top)}
    assert list(ukbench_counts(results, obj).values()) == [4, 2, 1, 3, 4, 4, 1, 3]
    with pytest.raises(UserError, match="the score needs the top 4"):
        ukbench_counts({**results, names[0]: names[:3]}, obj)
