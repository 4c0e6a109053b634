"""The demo's worlds (`mining.stages.demo.world`): its presets."""

from __future__ import annotations

from mining.stages.demo.world import PRESETS, _landmarks


def test_city100_preset_has_a_hundred_distinct_landmarks_and_the_others_keep_their_names():
    cfg = PRESETS["city100"]
    assert cfg["landmarks"] >= 100 and cfg["landmarks"] * cfg["queries"] >= 500
    lms = _landmarks(cfg, seed=0)
    assert len({lm.name for lm in lms}) == len(lms) == cfg["landmarks"]
    assert [lm.index for lm in lms] == list(range(cfg["landmarks"]))
    # the first 15 are the medium world's, name for name (the presets' worlds are unchanged)
    assert [lm.name for lm in lms[:15]] == [lm.name for lm in _landmarks(PRESETS["medium"], seed=0)]
