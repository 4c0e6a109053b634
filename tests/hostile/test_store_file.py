"""A descriptor store whose store.json is broken (not JSON, not an object, no method name) is
a UserError naming the file (one line on the CLI's stderr), never a traceback."""

from __future__ import annotations

import pytest

from mining.errors import UserError
from mining.retrieval.descriptors import open_store


@pytest.mark.parametrize("text", ["{", "[]", '{"dim": 8}', '{"method": 3}', "\x00\x01"])
def test_a_broken_store_json_is_one_line(tmp_path, text):
    (tmp_path / "store.json").write_text(text)
    with pytest.raises(UserError) as err:
        open_store(tmp_path)
    assert str(tmp_path / "store.json") in str(err.value) and "\n" not in str(err.value)

