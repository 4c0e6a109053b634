"""Spatial verification: inliers between generated images, the stores' keypoints, the +SP ranking."""

from __future__ import annotations

import pickle
import re
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from mining.photos import imageindex
from mining.settings import layout
from mining.retrieval import spatial
from mining.retrieval.descriptors import iter_similarities, open_store
from mining.errors import UserError
from mining.methods import get_method
from mining.methods.rootsift import rootsift_features
from mining.settings.options import defaults
from mining.retrieval.reranking import KeypointStore, LIFT, verified_landmark, verify_pairs
from mining.retrieval.methodstores import open_method
from mining.stages.describe import stage as describe
from scenes import gray, scene, transformed

DESCRIBE = defaults("describe")
SV = {"top_k": 100, "min_inliers": 15}
ASMK = {"codebook_size": 32, "max_features": 300, "spatial_verification": SV}


def keypoints(img: np.ndarray) -> spatial.Keypoints:
    f = rootsift_features(gray(img), 1000)
    return spatial.pack(f.geometry, f.des, f.size)


def perspective(img: np.ndarray) -> np.ndarray:
    h, w = img.shape[:2]
    src = np.float32([[0, 0], [w, 0], [w, h], [0, h]])
    dst = np.float32([[0.08 * w, 0.05 * h], [0.95 * w, 0], [w, h], [0.02 * w, 0.9 * h]])
    return cv2.warpPerspective(img, cv2.getPerspectiveTransform(src, dst), (w, h), borderMode=cv2.BORDER_REFLECT)


@pytest.mark.parametrize("seed", [1, 7, 21])
def test_a_scene_and_its_warped_copies_match_unrelated_scenes_do_not(seed):
    a = keypoints(scene(seed))
    for copy in (transformed(scene(seed)), perspective(scene(seed))):
        n, pts = spatial.verify(a, keypoints(copy))
        assert n >= 3 * SV["min_inliers"] and pts.shape == (n, 4)
    for other in range(100, 106):
        assert spatial.inliers(a, keypoints(scene(other))) < SV["min_inliers"]


def test_inlier_counts_are_the_same_bytes_twice_and_on_any_thread_count():
    a = keypoints(scene(3))
    pairs = [(a, keypoints(x)) for x in (transformed(scene(3)), perspective(scene(3)), scene(4), scene(5))]
    one = [spatial.verify(*p) for p in pairs]
    for got in (verify_pairs(pairs, threads=1), verify_pairs(pairs, threads=3)):
        assert [n for n, _ in got] == [n for n, _ in one]
        assert all(g.tobytes() == o.tobytes() for (_, g), (_, o) in zip(got, one))


def test_tentative_matches_are_mutual_and_pass_the_ratio_test():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 60, (40, 128)).astype(np.uint8)
    b = a.copy()
    b[:5] = rng.integers(0, 60, (5, 128))  # five that match nothing
    b[10] = b[11]  # two identical in b: a[10] and a[11] are each ambiguous
    ia, ib = spatial.tentative_matches(a, b)
    assert set(ia.tolist()) <= set(range(5, 40)) - {10, 11}
    assert (ia == ib).all() and ia.size >= 30


def test_spatial_verification_is_checked_as_a_method_setting():
    get_method("rsift-asmk", {"spatial_verification": {"top_k": 10}})
    for bad in ({"top_k": 0}, {"k": 3}, {"min_inliers": 2.5}, 5):
        with pytest.raises(UserError, match="spatial_verification"):
            get_method("rsift-vlad", {"spatial_verification": bad})


def _save(img: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(img).save(path, quality=92)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """rsift-asmk with and without keypoints over a 2-landmark world whose candidates include
    a planted photo of landmark 0 (a perspective view of its database image)."""
    root = tmp_path_factory.mktemp("spatial")
    images = root / "images"
    ids = list(range(2000, 2012))
    for pid in ids:
        _save(perspective(scene(0)) if pid == 2005 else scene(pid), images / layout.image_relpath(pid))
    imageindex.write(images, [{"photo_id": p, "status": "ok", "path": layout.image_relpath(p)} for p in ids])
    lm = root / "landmarks"
    imlist = [f"db_{i}" for i in range(4)]
    for i, name in enumerate(imlist):
        _save(scene(i), lm / "jpg" / f"{name}.jpg")
    qimlist, gnd = [], []
    for i in (0, 1):
        _save(transformed(scene(i)), lm / "jpg" / f"q{i}.jpg")
        qimlist.append(f"q{i}")
        gnd.append({"bbx": [0, 0, 360, 260], "easy": [i], "hard": [], "junk": []})
    (lm / "gnd_city.pkl").write_bytes(pickle.dumps({"imlist": imlist, "qimlist": qimlist, "gnd": gnd}))
    out = {}
    for tag, params in (("sp", ASMK), ("plain", {k: v for k, v in ASMK.items() if k != "spatial_verification"})):
        d = root / tag
        describe.run(inputs=describe.Inputs(images=images, image_set="candidates"), methods=["rsift-asmk"],
                     out=d / "candidates", options=replace(DESCRIBE, shard_size=5, params={"rsift-asmk": params}),
                     progress=False)
        for part in ("queries", "database"):
            describe.run(inputs=describe.Inputs(images=lm, image_set=part, models=d / "candidates"),
                         methods=["rsift-asmk"], out=d / part, options=DESCRIBE, progress=False)
        out[tag] = d
    return out, lm


def test_keypoints_are_kept_beside_an_unchanged_payload(stores):
    dirs, _ = stores
    sp, plain = dirs["sp"] / "candidates" / "shards", dirs["plain"] / "candidates" / "shards"
    for shard in ("00000", "00001", "00002"):
        assert (sp / f"{shard}.asmk.npz").read_bytes() == (plain / f"{shard}.asmk.npz").read_bytes()
        assert (sp / f"{shard}.ids.parquet").read_bytes() == (plain / f"{shard}.ids.parquet").read_bytes()
        assert not (plain / f"{shard}{spatial.GEOM_SUFFIX}").exists()
        g = spatial.load_shard(sp, shard)
        assert g.geometry.dtype == np.float16 and g.des.dtype == np.uint8 and len(g.offsets) == len(g.sizes) + 1
    kp = KeypointStore(open_store(dirs["sp"] / "database")).get(["db_2"])["db_2"]
    assert kp.size == (320, 240) and 0 < len(kp.geometry) <= 300
    assert kp.geometry[:, 0].max() < 320 and kp.geometry[:, 1].max() < 240


def test_a_store_reads_its_payloads_with_the_method_its_opener_hands_it(stores):
    """The store knows no method: an ASMK store opened without `method_of` refuses to read its
    payloads in one line naming the store; handed the registry's lookup, it reads them."""
    dirs, _ = stores
    bare = open_store(dirs["sp"] / "queries")
    assert bare.kind == "asmk" and len(bare.ids()) == 2  # its data (kind, ids) needs no method
    with pytest.raises(ValueError, match=r"queries: the payloads of a store of kind 'asmk' are read by its method"):
        bare.load_all()
    handed = open_store(dirs["sp"] / "queries", get_method)
    ids, payload = handed.load_all()
    sims = np.concatenate([s for _, s in iter_similarities(handed, open_store(dirs["sp"] / "database", get_method))],
                          axis=1)
    assert ids == bare.ids() and sims.shape == (2, 4) and np.isfinite(sims).all() and sims.max() > 0


def test_rerank_puts_verified_images_first_by_inliers_ties_by_score(stores):
    dirs, _ = stores
    q, d = open_store(dirs["sp"] / "queries", get_method), open_store(dirs["sp"] / "database", get_method)
    q_ids, db_ids = q.ids(), d.ids()
    sims = np.array([[0.1, 0.5, 0.4, 0.3], [0.5, 0.05, 0.4, 0.3]], np.float32)  # each query's own image last
    out = verified_landmark(q, d, q_ids, db_ids, sims, SV)
    assert [int(np.argmax(r)) for r in out] == [0, 1]  # the verified image moved from last to first
    n = [spatial.inliers(KeypointStore(q).get([qi])[qi], KeypointStore(d).get([f"db_{i}"])[f"db_{i}"])
         for i, qi in enumerate(q_ids)]
    assert out[0, 0] == np.float32(LIFT * n[0] + 0.1) and out[1, 1] == np.float32(LIFT * n[1] + 0.05)
    others = np.ones_like(sims, bool)
    others[[0, 1], [0, 1]] = False
    assert (out[others] == sims[others]).all()  # unverified images keep their similarity
    assert (verified_landmark(q, d, q_ids, db_ids, sims, {**SV, "top_k": 2}) == sims).all()  # outside the top 2


def test_score_and_evaluate_read_the_verified_similarities(stores):
    dirs, lm = stores
    with pytest.raises(UserError, match="spatial_verification"):
        open_method(dirs["plain"], spatial=True)
    assert open_method(dirs["plain"], spatial=None).spatial is None
    sp = open_method(dirs["sp"], spatial=None, method_of=get_method)
    assert sp.spatial == SV
    got_ids, got = [], []
    for ids, s in sp.candidate_similarities():
        got_ids += ids
        got.append(s)
    got = np.concatenate(got, axis=1)
    planted = got_ids.index("2005")
    assert got[0, planted] > LIFT * SV["min_inliers"]  # verified against query 0 (landmark 0)
    assert np.argmax(got[0]) == planted
    assert (got < LIFT * SV["min_inliers"]).sum() == got.size - 1  # nothing else verified
    plain = np.concatenate([s for _, s in iter_similarities(sp.queries, sp.candidates)], axis=1)
    keep = np.ones_like(got, bool)
    keep[0, planted] = False
    assert (got[keep] == plain[keep]).all()


# ----------------------------------------------------------------------------- evidence of a leak
@pytest.fixture(scope="module")
def city(tmp_path_factory):
    """The planted city described with rsift-asmk keeping keypoints (and rsift-vlad), scored with a short queue."""
    from planted import make_city, scored

    root = tmp_path_factory.mktemp("city")
    c = make_city(root)
    return c, root, None, scored(c, root, SV)


def test_geometry_puts_planted_landmark_photos_in_front_of_reviewers(city):
    import pyarrow.parquet as pq

    c, root, _, stats = city
    queue = pq.read_table(root / "scores" / "review_queue.parquet").to_pandas()
    t = SV["min_inliers"]
    own = np.array([c["planted"].get(p) == lm for p, lm in zip(queue["photo_id"], queue["landmark"])])
    mine, others = queue[own], queue[~own]  # others: unrelated photos, and planted photos of another landmark
    assert len(others) > 0
    # every planted photo reaches its own landmark's queue, flagged by its inliers, before any vote
    assert sorted(mine["photo_id"]) == sorted(c["planted"])
    assert (mine["inliers"] >= t).all(), mine[["photo_id", "inliers"]]
    assert (others["inliers"] < t).all(), others[["photo_id", "inliers"]].sort_values("inliers")
    assert all(img.startswith(("queries/", "database/")) for img in mine["inlier_image"])
    row = mine.iloc[0]
    assert len(row["inlier_points"]) == 4 * min(row["inliers"], 200) and len(row["inlier_frames"]) == 4
    assert stats["review_queue_geometry"] == {"method": "rsift-asmk", "min_inliers": t, "rows_at_min_inliers": len(
        queue[queue["inliers"] >= t])}
    for lm, rows in queue.groupby("landmark"):  # sorted by inliers, the planted photos come first
        by_inliers = rows.sort_values(["inliers", "rank"], ascending=[False, True])
        n_mine = int(sum(c["planted"].get(p) == lm for p in rows["photo_id"]))
        assert all(c["planted"].get(p) == lm for p in by_inliers["photo_id"][:n_mine])


def test_the_review_app_sorts_by_inliers_and_draws_the_matches(city, tmp_path):
    import re

    from fastapi.testclient import TestClient

    from mining.cli import main
    from mining.stages.review.app import create_app

    c, root, _, _ = city
    # as the workflow imports it: `mining review import` gives the score run's fingerprint (its stats.json)
    assert main(["review", "import", str(root / "scores" / "review_queue.parquet"), "--db", str(tmp_path / "review.sqlite")]) == 0
    client = TestClient(create_app(db_path=tmp_path / "review.sqlite", images=c["images"], landmarks=c["gnd"]),
                        base_url="http://127.0.0.1:8765")
    lm = "lm1_q"
    mine = sorted(p for p, owner in c["planted"].items() if owner == lm)
    by_rank = client.get("/api/items", params={"landmark": lm, "limit": 50}).json()
    by_inliers = client.get("/api/items", params={"landmark": lm, "limit": 50, "sort": "inliers"}).json()
    assert by_inliers["min_inliers"] == SV["min_inliers"] and by_rank["total"] == by_inliers["total"] == 12
    got = [int(it["photo_id"]) for it in by_inliers["items"]]
    assert sorted(got[:len(mine)]) == mine  # the planted photos first
    inl = [it["inliers"] for it in by_inliers["items"]]
    assert inl == sorted(inl, reverse=True) and sorted(got) == sorted(int(it["photo_id"]) for it in by_rank["items"])
    assert [it["rank"] for it in by_rank["items"]] == list(range(1, 13))
    # the next page after an item, in the inlier order
    after = client.get("/api/items", params={"landmark": lm, "limit": 3, "sort": "inliers",
                                             "after": by_inliers["items"][2]["id"]}).json()
    assert [it["id"] for it in after["items"]] == [it["id"] for it in by_inliers["items"][3:6]]
    top = by_inliers["items"][0]
    svg = client.get(f"/matches/{top['id']}")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    body = svg.text
    assert len(re.findall(r"<line ", body)) == min(top["inliers"], 200)
    assert body.count("data:image/jpeg;base64,") == 2 and "default-src 'none'" in svg.headers["content-security-policy"]
    unverified = next(it for it in by_inliers["items"] if it["inliers"] < SV["min_inliers"])
    assert client.get(f"/matches/{unverified['id'] + 10**6}").status_code == 404


def test_the_matches_drawing_escapes_names():
    from mining.stages.review.inliers import svg

    ev = {"inliers": 1, "image": "x", "points": [1, 2, 3, 4], "frames": [10, 10, 10, 10]}
    out = svg(ev, None, None, '3 inliers with queries/<script>alert("x")</script>')
    assert "<script>" not in out and "&lt;script&gt;" in out and out.count("<line ") == 1


def test_leak_risk_flags_the_planted_photos_by_their_inliers(city, tmp_path):
    from mining.stages.leakrisk.stage import run

    c, root, _, _ = city
    with pytest.raises(UserError, match="keep no keypoints"):
        run(landmarks=str(c["gnd"]), descriptors=root / "DESC" / "rsift-vlad", scores=root / "scores",
            geometry=root / "DESC" / "rsift-vlad", out=tmp_path / "x")
    st = run(landmarks=str(c["gnd"]), descriptors=root / "DESC" / "rsift-vlad", scores=root / "scores",
             geometry=root / "DESC" / "rsift-asmk", out=tmp_path / "lr")
    import pyarrow.parquet as pq

    lr = pq.read_table(tmp_path / "lr" / "leakrisk.parquet").to_pandas().set_index("photo_id")
    planted = list(c["planted"])
    assert (lr.loc[planted, "inliers"] >= SV["min_inliers"]).all() and lr.loc[planted, "high"].all()
    others = lr.drop(planted)
    assert (others["inliers"] < SV["min_inliers"]).all() and (others["inliers"] >= 0).all()  # 36 < 1,000: all verified
    assert st["geometry"]["at_min_inliers"] == len(planted) and st["geometry"]["verified"] == len(lr)
    assert all(img.startswith(("queries/", "database/")) for img in lr.loc[planted, "inlier_image"])


@pytest.mark.parametrize("edit, words", [
    (lambda row: {"inliers": -7}, "inliers is -7, not a whole number from -1"),
    (lambda row: {"inlier_points": [float("nan")] + row["inlier_points"][1:]}, "inlier_points[0] is nan"),
    (lambda row: {"inlier_points": row["inlier_points"][:-1] + [1e308]}, "is inf, not inside its image"),  # float32
    (lambda row: {"inlier_points": [float("-inf")] + row["inlier_points"][1:]}, "inlier_points[0] is -inf"),
    (lambda row: {"inlier_frames": [2**31 - 1, 10, 10, 10]}, "inlier_frames is [2147483647, 10, 10, 10]"),
    (lambda row: {"inlier_points": row["inlier_points"][:-1]}, "not (x, y, x, y) per inlier"),
], ids=["negative", "nan", "huge", "minus-inf", "frame", "ragged"])
def test_queue_evidence_out_of_its_domain_refuses_the_import_in_one_line(city, tmp_path, edit, words):
    """A queue's evidence is checked before it is stored: no NaN line, no 4-billion-pixel drawing."""
    from mining.stages.review import database, queue_import

    _, root, _, _ = city
    table = pq.read_table(root / "scores" / "review_queue.parquet")
    rows = table.to_pylist()
    k = next(i for i, r in enumerate(rows) if r["inliers"] > 0)
    rows[k] = {**rows[k], **edit(rows[k])}
    bad = tmp_path / "queue.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), bad)
    con = database.connect(tmp_path / "review.sqlite", create=True)
    try:
        with pytest.raises(UserError, match=re.escape(words)):
            queue_import.import_queue(con, bad, scores_fingerprint=None)
        assert con.execute("SELECT COUNT(*) FROM items").fetchone()[0] == 0  # nothing half imported
    finally:
        con.close()


def test_a_min_inliers_bar_that_is_not_a_number_refuses_the_import(city, tmp_path):
    from mining.stages.review import database, queue_import

    _, root, _, _ = city
    table = pq.read_table(root / "scores" / "review_queue.parquet")
    bad = tmp_path / "queue.parquet"
    pq.write_table(table.replace_schema_metadata({**(table.schema.metadata or {}), b"min_inliers": b"abc"}), bad)
    con = database.connect(tmp_path / "review.sqlite", create=True)
    try:
        with pytest.raises(UserError, match="min_inliers metadata is 'abc', not a whole number"):
            queue_import.import_queue(con, bad, scores_fingerprint=None)
    finally:
        con.close()
