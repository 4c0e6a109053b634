"""The review decisions (`mining.stages.review.decisions`): the majority of a photo's votes."""

import pytest

from mining.stages.review import decisions


@pytest.mark.parametrize("votes,expected", [
    (["y"], "landmark"), (["n", "n", "y"], "not_landmark"), (["y", "n"], "unclear"),
    (["y", "n", "u"], "unclear"), (["u"], "unclear"), (["y", "y", "u"], "landmark"),
    (["y", "y", "n", "n", "u"], "unclear"),
])
def test_majority(votes, expected):
    assert decisions.majority(votes) == expected
