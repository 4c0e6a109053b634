"""The report's section on how the review budget was spent (`mining.stages.report.review_budget`)."""

from __future__ import annotations

import json

from budget_queues import random_queues

from mining.stages.score.budget import allocate


def test_report_says_how_the_budget_was_spent(tmp_path):
    from mining.stages.report.review_budget import review_budget
    from mining.stages.report.common import Inputs

    risks, pids = random_queues(11, n_landmarks=45)
    _, spent = allocate(risks, pids, budget=300, min_per_landmark=2)
    (tmp_path / "stats.json").write_text(json.dumps({"review_budget": spent}))
    doc = review_budget(Inputs(scores=tmp_path))
    assert f"<td>items queued</td><td>{spent['items']}</td>" in doc
    top = min(spent["per_landmark"].items(), key=lambda kv: (-kv[1], kv[0]))
    assert f"<tr><td>{top[0]}</td><td>{top[1]}</td></tr>" in doc  # the most items listed first
    assert doc.count("</tr>") == 1 + 8 + 1 + 40 and "5 more landmarks hold" in doc
    (tmp_path / "stats.json").write_text(json.dumps({"review_top": 50}))
    assert review_budget(Inputs(scores=tmp_path)) == ""  # top K per landmark: nothing to say
