"""The image layout (mining/settings/layout.py): stable, R1M-shaped paths."""

from mining.settings import layout


def test_image_layout_is_stable_and_r1m_shaped():
    p = layout.image_relpath(123456789)
    key = layout.image_key(123456789)
    assert p == f"jpg/{key[:3]}/{key}.jpg"
    assert len(key) == 32 and layout.image_key(123456789) == key
    assert layout.image_key(1) != layout.image_key(2)
