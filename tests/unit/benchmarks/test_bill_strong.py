"""`benchmarks/bill_strong.py`: the arithmetic of the strong models' bill on cases checked by hand."""

from __future__ import annotations

import json

import pytest

from benchmarks import bill_strong
from benchmarks.bill import R1M_LANDMARK_IMAGES
from benchmarks.onnx_global import vit_macs


def test_core_hours_by_hand():
    # 1,000 ms an image: 3,600 candidates, half of them, and 1,800 other images -> 3,600 s = 1 core-hour
    assert bill_strong.core_hours(1000.0, 3600, 0.5, 1800) == pytest.approx(1.0)
    assert bill_strong.core_hours(1000.0, 3600, None, 0) == pytest.approx(1.0)  # no cascade: every candidate
    assert bill_strong.core_hours(500.0, 7200, 0.1, 0) == pytest.approx(0.1)


def test_vit_macs_and_the_scaling_by_hand():
    # 28 px, patch 14: 4 patches + CLS = 5 tokens; one block 4 wide: 12*16*5 + 2*25*4 = 1,160
    assert vit_macs(4, 28, depth=1) == 12 * 16 * 5 + 2 * 25 * 4 == 1160
    assert bill_strong.scaled_ms(227.0, 384, 224) == 227.0  # the measured model is itself
    ratio = vit_macs(768, 518) / vit_macs(384, 224)
    assert bill_strong.scaled_ms(100.0, 768, 518) == pytest.approx(100.0 * ratio)


def test_todays_r1m_bill_is_read_from_the_docs():
    assert bill_strong.todays_r1m_bill("... R1M costs **1,234 core-hours** from ...") == 1234
    assert bill_strong.todays_r1m_bill(bill_strong.PERFORMANCE.read_text()) > 0
    with pytest.raises(SystemExit):
        bill_strong.todays_r1m_bill("no bill here")


def test_the_rows(tmp_path, capsys):
    measured = tmp_path / "m.json"
    measured.write_text(json.dumps({"ms_per_image": {"vit_s14_224": 3600.0}}))
    bill_strong.main(["--measured", str(measured), "--cascade-share", "0.5"])
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 2 * 2 * 2 * 2  # models x sides x scales x (no cascade, 0.5)
    first, half = rows[0], rows[1]
    assert (first["model"], first["side"], first["scale"], first["cascade_share"]) == ("ViT-S/14", 224, "R1M", None)
    # 3.6 s an image: core-hours = images / 1,000
    assert first["images"] == 4_100_000 + R1M_LANDMARK_IMAGES and first["core_hours"] == pytest.approx(
        first["images"] / 1000, abs=0.05)
    assert half["images"] == 2_050_000 + R1M_LANDMARK_IMAGES and half["core_hours"] == pytest.approx(
        half["images"] / 1000, abs=0.05)
    assert rows[2]["scale"] == "100M" and rows[2]["candidates"] == 100_000_000
