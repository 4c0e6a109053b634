"""Table and JSON files (mining/files/tables.py): a JSON input missing or broken is one line naming it."""

import pytest

from mining.errors import UserError


def test_a_json_input_missing_or_broken_is_one_line_naming_it(tmp_path):
    from mining.files.tables import read_json

    plan = tmp_path / "plan.json"
    with pytest.raises(UserError, match=r"^audit plan .*plan\.json not found \(make it with `mining audit draw`\)$"):
        read_json(plan, "audit plan", hint="make it with `mining audit draw`")
    plan.write_text('{"sample": [1, 2')
    with pytest.raises(UserError, match=r"plan\.json: not JSON \("):
        read_json(plan, "audit plan")
    plan.write_text('{"sample": [1, 2]}')
    assert read_json(plan, "audit plan") == {"sample": [1, 2]}
