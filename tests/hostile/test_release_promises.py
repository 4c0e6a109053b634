"""What `mining release` promises, on inputs built to break the promise.

- a face is blurred however the JPEG stores its orientation (EXIF 1-8): the detector sees the
  photo as every viewer shows it, and what is written is upright with no orientation tag;
- a licence is known only when its URL is exactly a Creative Commons (or other YFCC) licence
  URL and its name agrees: a CC path inside another host's URL, or a CC URL under an
  "All Rights Reserved" name, is `unknown`, never released, and counted as such on the card.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image, ImageOps
from rotations import FACE, ORIENTATION, STORE, stored_jpeg, upright_source

from mining.settings.layout import image_relpath
from mining.publishing.licences import licence_code
from releasing import run_release

BY = ("Attribution License", "http://creativecommons.org/licenses/by/2.0/")


def _selection(root, rows):
    sel = root / "selected"
    sel.mkdir(parents=True)
    frame = pd.DataFrame([{"rank": r, "photo_id": pid, "path": image_relpath(pid), "license_name": name,
                           "license_url": url, "user_nsid": f"{pid}@N00", "user_nickname": f"owner {pid}"}
                          for r, (pid, name, url) in enumerate(rows, 1)])
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sel / "distractors.parquet")
    return sel


@pytest.fixture(scope="module")
def rotated(tmp_path_factory):
    root = tmp_path_factory.mktemp("rotated")
    up = upright_source()
    for o in STORE:
        path = root / "images" / image_relpath(1000 + o)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(stored_jpeg(up, o))
        with Image.open(path) as im:  # the test's own premise: every viewer shows the face upright
            shown = np.asarray(ImageOps.exif_transpose(im).convert("RGB"), np.float32)
        assert shown.shape[:2] == (up.height, up.width)
        assert np.abs(shown - np.asarray(up, np.float32)).mean() < 4
    sel = _selection(root, [(1000 + o, *BY) for o in STORE])
    stats = run_release(sel, root / "images", root / "rel", licenses="all", workers=1)
    return root, up, stats


def _displayed(path) -> tuple[np.ndarray, int]:
    with Image.open(path) as im:
        tag = im.getexif().get(ORIENTATION, 1)
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"), np.float32), tag


@pytest.mark.parametrize("orientation", sorted(STORE))
def test_a_face_is_blurred_whatever_the_exif_orientation(rotated, orientation):
    root, up, stats = rotated
    table = pq.read_table(root / "rel" / "release.parquet").to_pandas().set_index("photo_id")
    row = table.loc[1000 + orientation]
    assert row.status == "released" and row.faces >= 1 and bool(row.blurred), row.to_dict()
    out, tag = _displayed(root / "rel" / image_relpath(1000 + orientation))
    assert tag == 1, "the released image keeps an orientation tag"
    src = np.asarray(up, np.float32)
    assert out.shape == src.shape, "the released image is not upright"
    x, y, w, h = FACE
    face = np.abs(out[y:y + h, x:x + w] - src[y:y + h, x:x + w]).mean()
    assert face > 10, f"face region barely changed ({face:.1f})"
    away = np.abs(out[300:, :] - src[300:, :]).mean()  # below the face: same photo, same way up
    assert away < 4, f"the rest of the photo moved ({away:.1f})"
    # the face boxes are in the upright image's coordinates
    boxes = json.loads(row.face_boxes)
    assert any(abs(b[0] - x) < 20 and abs(b[1] - y) < 20 for b in boxes), boxes


def test_rotated_release_is_the_same_bytes_with_more_workers(rotated):
    root, _, _ = rotated
    sel = root / "selected"
    run_release(sel, root / "images", root / "rel4", licenses="all", workers=4)
    for name in ("SHA256SUMS", "release.parquet"):
        assert (root / "rel" / name).read_bytes() == (root / "rel4" / name).read_bytes()


# ----------------------------------------------------------------------------- licences

EVIL = [
    ("All Rights Reserved", "http://creativecommons.org/licenses/by/2.0/"),
    ("Attribution License", "http://evil.example/creativecommons.org/licenses/by/2.0/"),
    ("Attribution License", "http://creativecommons.org.evil.example/licenses/by/2.0/"),
    ("Attribution License", "https://evil.example/?u=http://creativecommons.org/licenses/by/2.0/"),
    ("Attribution License", "http://creativecommons.org/licenses/by/2.0/../../evil"),
    ("Attribution License", "ftp://creativecommons.org/licenses/by/2.0/"),
    ("Attribution License", "http://user@creativecommons.org/licenses/by/2.0/"),
    ("Attribution License", "http://creativecommons.org:8080/licenses/by/2.0/"),
    ("Attribution License", "http://creativecommons.org/licenses/by/2.0/#x"),
    ("Attribution License", "http://creativecommons.org/licenses/by/9.9/"),
    ("Attribution License", "http://creativecommons.org/licenses/by-xx/2.0/"),
    ("Attribution-NonCommercial License", "http://creativecommons.org/licenses/by/2.0/"),  # name disagrees
    ("Attribution License", "http://creativecommons.org/licenses/by-nc/2.0/"),
    ("Attribution License", ""),
    ("Attribution License", None),
    (None, "http://creativecommons.org/licenses/by/2.0/"),
    ("Attribution License evil", "http://creativecommons.org/licenses/by/2.0/"),
    ("No known copyright restrictions", "http://evil.example/flickr.com/commons/usage/"),
    ("United States Government Work", "http://evil.usa.gov.example/"),
    ("Public Domain Dedication (CC0)", "https://evil.example/creativecommons.org/publicdomain/zero/1.0/"),
]
GOOD = [
    (("Attribution License", "http://creativecommons.org/licenses/by/2.0/"), "by"),
    (("Attribution-ShareAlike License", "https://creativecommons.org/licenses/by-sa/2.0/"), "by-sa"),
    (("Attribution-NoDerivs License", "http://www.creativecommons.org/licenses/by-nd/2.0/"), "by-nd"),
    (("Attribution-NonCommercial License", "http://creativecommons.org/licenses/by-nc/2.0/"), "by-nc"),
    (("Attribution-NonCommercial-ShareAlike License", "http://creativecommons.org/licenses/by-nc-sa/2.0/"), "by-nc-sa"),
    (("Attribution-NonCommercial-NoDerivs License", "http://creativecommons.org/licenses/by-nc-nd/2.0/"), "by-nc-nd"),
    (("No known copyright restrictions", "https://www.flickr.com/commons/usage/"), "nkcr"),
    (("Public Domain Dedication (CC0)", "https://creativecommons.org/publicdomain/zero/1.0/"), "cc0"),
    (("Public Domain Mark", "https://creativecommons.org/publicdomain/mark/1.0/"), "pdm"),
    (("United States Government Work", "http://www.usa.gov/copyright.shtml"), "us-gov"),
]


@pytest.mark.parametrize("name, url", EVIL)
def test_a_licence_is_known_only_from_an_exact_url_and_an_agreeing_name(name, url):
    assert licence_code(name, url) is None


@pytest.mark.parametrize("pair, code", GOOD)
def test_yfcc_licences_are_known(pair, code):
    assert licence_code(*pair) == code


def test_commercial_release_leaves_out_every_unknown_licence_and_the_card_counts_them(tmp_path):
    up = upright_source().resize((224, 256))
    data = io.BytesIO()
    up.save(data, "JPEG", quality=90)
    rows = [(2000 + i, name, url) for i, (name, url) in enumerate(EVIL)] + [(3000, *BY)]
    for pid, _, _ in rows:
        p = tmp_path / "images" / image_relpath(pid)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.getvalue())
    sel = _selection(tmp_path, rows)
    for policy in ("commercial", "all"):
        out = tmp_path / f"rel-{policy}"
        stats = run_release(sel, tmp_path / "images", out, licenses=policy, blur=False, candidates=None)
        table = pq.read_table(out / "release.parquet").to_pandas()
        assert list(table.photo_id[table.status == "released"]) == [3000]
        assert (table.license_code.isna() == (table.photo_id != 3000)).all()
        assert stats["released"] == 1 and stats["excluded"] == {"licence_unknown": len(EVIL)}
        assert stats["licences"]["unknown"] == len(EVIL)
        card = (out / "README.md").read_text()
        assert f"| unknown licence | {len(EVIL)} | 0 |" in card and "left out" in card
        assert "All Rights Reserved" in card and "http://evil.example" not in card  # listed, inert (no autolink)
        assert "evil" not in (out / "ATTRIBUTION.md").read_text()


def test_the_card_says_when_the_selection_was_made_from_a_partial_review(tmp_path):
    """select --partial-review allow counts the unanswered queue photos in selected/stats.json;
    the card says so (they were never looked at and may show a landmark), and nothing when whole."""
    data = io.BytesIO()
    upright_source().resize((224, 256)).save(data, "JPEG", quality=90)
    for pid in (3000, 3001):
        p = tmp_path / "images" / image_relpath(pid)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.getvalue())
    sel = _selection(tmp_path, [(3000, *BY), (3001, *BY)])
    review = {"queue_photos": 239, "answered": 10, "unanswered": 229, "answers_label_is_this_queue": True,
              "partial_review": "allow"}
    for entry, says in [(review, True), ({**review, "answered": 239, "unanswered": 0}, False), (None, False)]:
        (sel / "stats.json").write_text(json.dumps({"n_selected": 2, "review": entry}))
        out = tmp_path / f"rel-{says}-{entry is None}"
        stats = run_release(sel, tmp_path / "images", out, blur=False, candidates=None)
        card = (out / "README.md").read_text()
        assert ("made from a partial review: 10 of the review queue's 239 photos were answered" in card) == says, card
        assert ("229 of them were never looked at" in card) == says
        assert stats["review"] == entry
