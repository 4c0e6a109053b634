"""Near-duplicates: the demo world's planted bursts and re-uploads are found; select and the
review queue use them (micro world; a cheap global descriptor stands in for cnn-gem)."""

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mining.settings import options
from mining.evidence import screening
from mining.cli import main
from mining.retrieval.descriptors import write_global_shard, write_store_info
from mining.datasets.landmarks import load_landmarks
from mining.stages.demo.realism import _read, histogram_descriptor
from mining.stages.demo.stage import run_build
from mining.stages.demo.world import as_download_folder
from mining.stages.neardup import stage as neardup


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A micro world, its candidates as a download folder, histogram descriptors as a global store."""
    root = tmp_path_factory.mktemp("nd")
    world = root / "world"
    run_build(out=world, options=replace(options.defaults("demo"), preset="micro", seed=5), workers=1)
    as_download_folder(world, root / "images")
    ds = load_landmarks(world / "landmarks")
    truth = pq.read_table(world / "truth.parquet").to_pandas()
    desc = root / "desc" / "hist"
    sets = {"candidates": ([str(p) for p in truth.photo_id], [world / "images" / f"{p}.jpg" for p in truth.photo_id], None),
            "queries": (ds.qimlist, [ds.image_path(q) for q in ds.qimlist], [ds.bbox(i) for i in range(len(ds.qimlist))]),
            "database": (ds.imlist, [ds.image_path(n) for n in ds.imlist], None)}
    for part, (ids, paths, boxes) in sets.items():
        vecs = np.stack([histogram_descriptor(_read(p, boxes[i] if boxes else None)) for i, p in enumerate(paths)])
        write_store_info(desc / part, {"method": "hist", "kind": "global", "set": part, "dim": int(vecs.shape[1])})
        write_global_shard(desc / part, "00000", list(ids), vecs)
    return root, world, ds, truth


TH = ["--min-cosine", "0.9", "--landmark-min-cosine", "0.8"]  # the histogram descriptor's scale, not cnn-gem's


def test_planted_bursts_and_reuploads_are_found(run, capsys):
    root, world, ds, truth = run
    planted = json.loads((world / "world.json").read_text())["counts"]["near_duplicates"]
    assert planted == {"bursts": 1, "burst_copies": 2, "reuploads": 1}
    assert (truth.view == "burst").sum() == 2 and (truth.view == "reupload").sum() == 1
    assert main(["neardup", "--images", str(root / "images"), "--landmarks", str(world / "landmarks"),
                 "--descriptors", str(root / "desc" / "hist"), "--out", str(root / "nd"), *TH]) == 0
    err = capsys.readouterr().err  # long work shows progress: images hashed, pair tiles compared
    assert "neardup: hashing" in err and "neardup: pairs" in err and "neardup: hashing landmark images" in err
    table = pq.read_table(root / "nd" / "neardup.parquet").to_pandas()
    m = neardup.measure(table, truth)
    assert m["groups"]["true_pairs"] == 3 and m["groups"]["precision"] == 1.0 and m["groups"]["recall"] == 1.0
    lc = m["landmark_copies"]
    assert lc["planted"] == 1 and lc["precision"] == 1.0 and lc["recall"] == 1.0 and lc["right_landmark"] == 1
    stats = json.loads((root / "nd" / "stats.json").read_text())
    assert stats["groups"] == 1 and stats["redundant"] == 2 and stats["copies_of_landmark_images"] == 1
    # the criterion needs both signals: a hash threshold of 0 bits finds nothing
    assert main(["neardup", "--images", str(root / "images"), "--landmarks", str(world / "landmarks"),
                 "--descriptors", str(root / "desc" / "hist"), "--out", str(root / "nd0"), *TH,
                 "--max-hash-distance", "0", "--landmark-max-hash-distance", "0", "--no-progress"]) == 0
    assert "neardup:" not in capsys.readouterr().err
    assert json.loads((root / "nd0" / "stats.json").read_text())["pairs"] == 0


def test_dhash_is_stable_under_a_burst_and_far_between_scenes(run):
    _, world, _, truth = run
    copies = truth[truth.view == "burst"]
    src = int(copies.copy_of.iloc[0][6:])
    h = {p: neardup.dhash(world / "images" / f"{p}.jpg") for p in truth.photo_id}
    near = [int(neardup.hamming(np.uint64(h[p]), np.uint64(h[src]))) for p in copies.photo_id]
    others = [int(neardup.hamming(np.uint64(h[a]), np.uint64(h[b]))) for a in truth.photo_id for b in truth.photo_id
              if a < b and src not in (a, b) and a not in set(copies.photo_id) and b not in set(copies.photo_id)]
    assert max(near) <= options.defaults("neardup").max_hash_distance < np.percentile(others, 5)  # unrelated images: about 32 bits apart
    assert 24 < np.median(others) < 40
    assert neardup.dhash(world / "no-such.jpg") is None


def test_groups_are_connected_components():
    g = neardup.groups_of(6, np.array([[0, 3], [3, 5], [1, 2]]))
    assert g.tolist() == [0, 1, 1, 0, 4, 0]


def _decisions(tmp_path, rows):
    df = pd.DataFrame(rows, columns=["landmark", "photo_id", "decision"])
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp_path / "d.parquet")
    return df


def test_select_filter_keeps_one_per_group_and_never_an_unreviewed_copy(tmp_path):
    nd = tmp_path / "nd.parquet"
    pq.write_table(pa.table({"photo_id": [1, 2, 3, 4, 5, 6], "group": [1, 1, 3, 3, 5, 6],
                             "copy_of": [None, None, None, None, "lm_q1", "db_7"],
                             "probable_landmark": [None, None, None, None, "lm", "lm"]}), nd)
    pid = np.array([1, 2, 3, 4, 5, 6, 7])
    order = np.array([1, 0, 4, 3, 2, 5, 6])  # ranked: 2, 1, 5, 4, 3, 6, 7
    dec = pd.DataFrame({"landmark": ["lm"], "photo_id": [6], "decision": ["not_landmark"]})
    got, st = screening.neardup_filter_order(order, pid, dec, nd, "one_per_group")
    assert pid[got].tolist() == [2, 4, 6, 7]  # 5 copies a landmark image, unreviewed; 1 and 3 are redundant
    assert st == {"policy": "one_per_group", "probable_landmark_dropped": 1,
                  "probable_landmark_cleared_by_review": 1, "redundant_dropped": 2}
    got, st = screening.neardup_filter_order(order, pid, dec, nd, "keep")
    assert pid[got].tolist() == [2, 1, 4, 3, 6, 7] and st["redundant_dropped"] == 0
    with pytest.raises(Exception, match="policy"):
        screening.neardup_filter_order(order, pid, dec, nd, "all")


def test_probable_landmarks_head_their_landmarks_queue(tmp_path):
    nd = tmp_path / "nd.parquet"
    pq.write_table(pa.table({"photo_id": [10, 11, 12], "group": [10, 11, 12], "copy_of": ["a_q1", None, "b_3"],
                             "probable_landmark": ["a", None, "b"]}), nd)
    rows = {"landmark": ["a", "a", "b", "b"], "photo_id": [11, 13, 12, 14], "rank": [1, 2, 1, 2],
            "score": [3.0, 2.0, 5.0, 1.0], "total_score": [3.0, 2.0, 5.0, 1.0], "best_query": ["a_q1", "a_q1", "b_q1", "b_q1"]}
    out = screening.prepend_probable(rows, nd, np.array([10, 11, 12, 13, 14]), np.array([0.5, 3, 5, 2, 1.0]), ["a", "b"])
    assert out["photo_id"] == [10, 11, 13, 12, 14]
    assert out["rank"] == [1, 2, 3, 1, 2]
    assert out["probable_landmark"] == [True, False, False, True, False]
    assert out["total_score"][0] == 0.5 and out["score"][0] is None and out["score"][3] == 5.0


def test_float16_rows_normalised_tile_by_tile_give_the_pairs_of_unit_rows():
    """The oracle keeps the store's float16 rows (half the memory) and makes each tile unit
    float32 rows as it goes: the same pairs as unit rows of the whole matrix, across tiles."""
    from mining.retrieval.methodstores import unit_rows

    raw, hashes, ok = _planted(300, 120, seed=4)
    th = replace(options.defaults("neardup"), max_hash_distance=12, min_cosine=0.9)
    whole = neardup.all_close_pairs(unit_rows(raw), hashes, ok, th, block=64)
    tiled = neardup.all_close_pairs(raw, hashes, ok, th, block=64, normalize=True)
    assert len(whole) > 20  # planted copies across many 64-row tiles
    assert np.array_equal(whole, tiled)


def _planted(n, copies, seed, dim=64):
    """n random float16 rows (scaled: not unit) and `copies` noisy copies, shuffled; hashes
    of the copies a few bits from their source's, the rest random, some piled on 0; 5 % unreadable."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n, dim)).astype(np.float32)
    src = rng.integers(0, n, copies)
    vec = np.concatenate([base, base[src] + rng.normal(0, 0.15, (copies, dim)).astype(np.float32)])
    h = rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64) * np.uint64(2)
    h[: n // 20] = 0  # flat images all hash to 0
    flips = np.zeros(copies, np.uint64)
    for _ in range(14):  # 0-14 bits flipped: on both sides of the 10-12 bit thresholds
        flips ^= np.where(rng.random(copies) < 0.5, np.uint64(1) << rng.integers(0, 64, copies).astype(np.uint64), np.uint64(0))
    hashes = np.concatenate([h, h[src] ^ flips])
    perm = rng.permutation(n + copies)
    raw = (vec.astype(np.float16) * np.float16(3))[perm]
    return raw, hashes[perm], rng.random(n + copies) > 0.05


@pytest.mark.parametrize("radius, min_cosine", [(10, 0.9), (12, 0.5), (3, 0.9), (0, -1.0), (40, 0.9)])
def test_indexed_pairs_are_the_all_pairs_oracles(radius, min_cosine):
    """The stage's pairs (hash index, then cosines) are exactly all pairs' (float32 tiles), with
    the rows in another order than the candidates (`rows`), and at a radius where the index
    gives way to all pairs (40 bits)."""
    raw, hashes, ok = _planted(1500, 600, seed=radius)
    th = replace(options.defaults("neardup"), max_hash_distance=radius, min_cosine=min_cosine)
    oracle = neardup.all_close_pairs(raw, hashes, ok, th, block=512, normalize=True)
    assert len(oracle) > 30
    order = np.random.default_rng(1).permutation(len(raw))
    stored = np.empty_like(raw)
    stored[order] = raw  # candidate i is stored[order[i]]
    assert np.array_equal(neardup.close_pairs(stored, hashes, ok, th, rows=order, normalize=True, threads=2), oracle)
