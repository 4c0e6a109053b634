"""An evaluation kit is a stranger's folder: `mining evaluate --kit` reads nothing outside it and
never loads what kit.json does not promise. Each tampered kit here has its SHA256SUMS made
again (as a tamperer would), so the checksums pass and only the reader's own checks stand:
every case ends in one line naming the file and what is wrong, exit 2, never a traceback.

Own queries (`--queries Q.npy`) are checked as they will be used: float16 unit rows, as the
kit's stores keep them; a huge row (which overflows float16 to inf and scored mAP 0 with
exit 0), a zero row, NaN or inf are refused in one line."""

from __future__ import annotations

import json
import os
import pickle
import shutil

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from mining.files import checksums
from mining.cli import main
from mining.kit.write import write_kit

from forged import npy_header
from evaluate_world import build_world, run_inputs


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(the kit, its gnd): one global method, 6 queries, 40 distractors in 3 shards."""
    root = tmp_path_factory.mktemp("kit")
    world = build_world(root / "w")
    _, _, _, selected = run_inputs(world, root)
    assert main(["evaluate", "--landmarks", str(world / "lm/gnd_city.pkl"), "--descriptors", str(world / "desc/gem"),
                 "--scores", str(root / "scores"), "--selected", str(root / "selected"), "--out", str(root / "eval"),
                 "--bootstrap-samples", "0", "--no-progress"]) == 0
    run = json.loads((root / "eval/evaluation.json").read_text())
    sel = pd.DataFrame({"rank": np.arange(1, selected.size + 1), "photo_id": selected,
                        "path": [f"jpg/{i}.jpg" for i in selected], "released": True})
    write_kit(root / "kit", [world / "desc/gem"], sel, run, shard_rows=16)
    return root / "kit", world / "lm/gnd_city.pkl"


def _copy(made, tmp_path):
    kit = tmp_path / "kit"
    shutil.copytree(made[0], kit)
    return kit


def _resum(kit):
    (kit / checksums.SUMS).write_text(checksums.sha256sums(kit))


def _evaluate(kit, gnd, capsys, *extra):
    capsys.readouterr()
    rc = main(["evaluate", "--kit", str(kit), "--landmarks", str(gnd), *extra])
    return rc, capsys.readouterr().err.strip()


def _one_line(rc, err, *words):
    assert rc == 2 and err.count("\n") == 0 and "Traceback" not in err, err
    for w in words:
        assert w in err, err


def test_the_untouched_kit_reproduces(made, tmp_path, capsys):
    rc, err = _evaluate(made[0], made[1], capsys, "--out", str(tmp_path / "o"))
    assert rc == 0, err
    assert json.loads((tmp_path / "o/evaluation.json").read_text())["reproduced"]["ok"]


TAMPER = {
    # file (relative to the kit) → (new bytes or None to delete, words the error must carry)
    "pickle as rows": ("methods/gem/distractors/shards/00000.npy", pickle.dumps({"rows": [1, 2]}), "not a .npy array"),
    "object .npy as rows": ("methods/gem/queries/shards/00000.npy", None, "objects and pickles are refused"),
    "pickle as similarities": ("methods/gem/similarities/landmarks.npy", pickle.dumps([0.5]), "not a .npy array"),
    "3.55 PiB header": ("methods/gem/similarities/distractors.npy", npy_header((2 ** 50, 2 ** 20), "<f4"),
                        "its header declares"),
    "rows of another shape": ("methods/gem/database/shards/00001.npy", None, "expected float16 (25, 16)"),
    "missing shard": ("methods/gem/distractors/shards/00001.npy", b"", "missing"),
    "missing ids": ("methods/gem/queries/shards/00000.ids.parquet", b"", "missing"),
    "broken ids": ("methods/gem/database/shards/00000.ids.parquet", b"PAR1 not really PAR1", "not a readable Parquet"),
    "broken table": ("distractors.parquet", b"garbage", "not a readable Parquet"),
    "store.json not JSON": ("methods/gem/queries/store.json", b"{", "not readable as JSON"),
}


@pytest.mark.parametrize("case", sorted(TAMPER))
def test_a_tampered_file_is_one_line_naming_it(made, tmp_path, capsys, case):
    rel, data, words = TAMPER[case]
    kit = _copy(made, tmp_path)
    path = kit / rel
    if case == "object .npy as rows":
        np.save(path, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    elif case == "rows of another shape":
        np.save(path, np.zeros((25, 8), np.float16))
    elif data == b"":
        path.unlink()
    else:
        path.write_bytes(data)
    _resum(kit)
    rc, err = _evaluate(kit, made[1], capsys)
    _one_line(rc, err, str(path), words)


JSON_TAMPER = {
    "n: -5": ("evaluation.json", lambda d: d.update(n=-5), "n must be a whole number ≥ 0, found -5"),
    "n: text": ("evaluation.json", lambda d: d.update(n="40"), "n must be a whole number"),
    "no curve": ("evaluation.json", lambda d: d.pop("curve"), "curve.gem.easy.sizes must be whole numbers ≥ 0"),
    "unknown setup": ("evaluation.json", lambda d: d.update(setups=["easy", "extreme"]), "setups must be a list"),
    "count: -5": ("methods/gem/queries/store.json", lambda d: d.update(count=-5), "count must be a whole number"),
    "count off by one": ("methods/gem/distractors/store.json", lambda d: d.update(count=41), "count is 41 but"),
    "fewer shards": ("methods/gem/distractors/store.json", lambda d: d.update(shards=2),
                     "shards/00002.ids.parquet: not one of the 2 shards store.json names"),
    "selection size": ("kit.json", lambda d: d["selection"].update(distractors=-5), "selection.distractors"),
}


@pytest.mark.parametrize("case", sorted(JSON_TAMPER))
def test_a_tampered_json_field_is_one_line_naming_it(made, tmp_path, capsys, case):
    rel, edit, words = JSON_TAMPER[case]
    kit = _copy(made, tmp_path)
    doc = json.loads((kit / rel).read_text())
    edit(doc)
    (kit / rel).write_text(json.dumps(doc))
    _resum(kit)
    rc, err = _evaluate(kit, made[1], capsys)
    _one_line(rc, err, str(kit / rel) if case != "fewer shards" else str(kit), words)


@pytest.mark.parametrize("name", ["../../../x", "..", "a/b", "a\\b"])
def test_a_method_name_that_is_a_path_is_refused(made, tmp_path, capsys, name):
    """kit.json's method names are folders of the kit; `../../../x` would open stores outside it."""
    kit = _copy(made, tmp_path)
    outside = tmp_path / "x"
    if name == "../../../x":  # a complete method outside the kit, where the name points
        shutil.copytree(kit / "methods/gem", outside)
    info = json.loads((kit / "kit.json").read_text())
    info["methods"] = {name: info["methods"]["gem"]}
    (kit / "kit.json").write_text(json.dumps(info))
    _resum(kit)
    rc, err = _evaluate(kit, made[1], capsys)
    _one_line(rc, err, "kit.json", "is not a plain name")


def test_a_symlinked_file_is_refused_not_followed(made, tmp_path, capsys):
    kit = _copy(made, tmp_path)
    outside = tmp_path / "outside.npy"
    target = kit / "methods/gem/queries/shards/00000.npy"
    shutil.copyfile(target, outside)
    target.unlink()
    os.symlink(outside, target)
    _resum(kit)  # the link's target has the listed digest: only the link itself can be refused
    rc, err = _evaluate(kit, made[1], capsys)
    _one_line(rc, err, str(target), "a symbolic link inside the kit")


def test_a_symlinked_folder_cannot_hide_an_added_file(made, tmp_path, capsys):
    kit = _copy(made, tmp_path)
    shards = kit / "methods/gem/distractors/shards"
    moved = tmp_path / "elsewhere"
    shutil.move(shards, moved)
    os.symlink(moved, shards)
    (moved / "00003.ids.parquet").write_bytes(b"added")  # a file the SHA256SUMS never listed
    rc, err = _evaluate(kit, made[1], capsys)
    _one_line(rc, err, str(shards), "a symbolic link inside the kit")


def test_a_kit_that_is_a_symlink_is_refused(made, tmp_path, capsys):
    os.symlink(made[0], tmp_path / "link")
    rc, err = _evaluate(tmp_path / "link", made[1], capsys)
    _one_line(rc, err, "a symbolic link")


def test_npz_members_are_checked_by_their_headers(tmp_path):
    """A model.npz or an ASMK shard: every member a .npy of numbers whose header fits its size."""
    import zipfile

    from mining.errors import UserError
    from mining.kit.check import check_npz

    good = tmp_path / "good.npz"
    np.savez(good, pca_mean=np.zeros(4, np.float32), pca_proj=np.eye(4, dtype=np.float32))
    check_npz(good)
    bad = {"object": lambda z: z.writestr("centroids.npy", _object_npy()),
           "huge": lambda z: z.writestr("centroids.npy", npy_header((2 ** 40, 2 ** 20), "<f4")),
           "pickle": lambda z: z.writestr("centroids.npy", pickle.dumps({"a": 1})),
           "other member": lambda z: z.writestr("run.py", b"print(1)")}
    for case, write in bad.items():
        path = tmp_path / f"{case}.npz"
        with zipfile.ZipFile(path, "w") as z:
            write(z)
        with pytest.raises(UserError, match=f"^{path}"):
            check_npz(path)
    (tmp_path / "not.npz").write_bytes(b"PK not a zip")
    with pytest.raises(UserError, match="not a readable .npz"):
        check_npz(tmp_path / "not.npz")


def _object_npy():
    import io

    buf = io.BytesIO()
    np.save(buf, np.array([None, {"a": 1}], dtype=object), allow_pickle=True)
    return buf.getvalue()


def _queries(made, tmp_path, rows):
    path = tmp_path / "q.npy"
    np.save(path, rows)
    return path


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture()
def own(made):
    """The kit's own query rows, as float32: valid queries."""
    ids = pq.read_table(made[0] / "methods/gem/queries/shards/00000.ids.parquet").column("id").to_pylist()
    rows = np.load(made[0] / "methods/gem/queries/shards/00000.npy").astype(np.float32)
    assert ids == [f"lm{q % 3}_{q:03d}" for q in range(6)]  # the gnd's qimlist order
    return _unit(rows.astype(np.float64)).astype(np.float32)


def test_own_unit_queries_are_evaluated(made, tmp_path, capsys, own):
    q = _queries(made, tmp_path, own)
    rc, err = _evaluate(made[0], made[1], capsys, "--queries", str(q), "--out", str(tmp_path / "o"))
    assert rc == 0, err
    rep = json.loads((tmp_path / "o/evaluation.json").read_text())
    assert rep["results"]["gem"]["easy"]["none"]["mAP"] > 0.1


@pytest.mark.parametrize("case,words", [
    ("times 1e6", "row 0 has length 1e+06"),  # finite, but inf once cast to float16
    ("times 3", "row 0 has length 3"),
    ("zero row", "row 2 is all zeros"),
    ("nan", "row 4 has NaN or infinite values"),
    ("inf", "row 1 has NaN or infinite values"),
    ("float16 max", "of 6 rows are not unit length"),
])
def test_own_queries_out_of_range_are_one_line(made, tmp_path, capsys, own, case, words):
    x = own.astype(np.float64)
    if case == "times 1e6":
        x = x * 1e6
    elif case == "times 3":
        x = x * 3
    elif case == "zero row":
        x[2] = 0
    elif case == "nan":
        x[4, 3] = np.nan
    elif case == "inf":
        x[1, 0] = np.inf
    else:  # values float16 cannot hold, in a float16 file: inf already
        x = (x * 1e5).astype(np.float16)
    q = _queries(made, tmp_path, x)
    rc, err = _evaluate(made[0], made[1], capsys, "--queries", str(q))
    _one_line(rc, err, f"--queries {q}", words)


def test_own_queries_as_a_store_are_checked_too(made, tmp_path, capsys, own):
    """A store folder of the kit's method and settings whose rows are not unit rows (a zero row)."""
    store = tmp_path / "q"
    shutil.copytree(made[0] / "methods/gem/queries", store)
    rc, err = _evaluate(made[0], made[1], capsys, "--queries", str(store))
    assert rc == 0, err
    x = own.astype(np.float16)
    x[3] = 0
    np.save(store / "shards/00000.npy", x)
    rc, err = _evaluate(made[0], made[1], capsys, "--queries", str(store))
    # refused by the store reader (every reader of a global store), in one line naming the store and the row
    _one_line(rc, err, str(store), "row 3 (", "is all zeros")


def test_a_local_descriptor_store_is_checked_by_its_shards(tmp_path):
    """A kit store of a non-global method (rsift-asmk's `NNNNN.asmk.npz` beside its ids): a whole
    one passes; a shard whose descriptors are missing, or whose npz holds an object, is refused."""
    from mining.retrieval.descriptors import write_ids, write_store_info
    from mining.errors import UserError
    from mining.kit.check import check_store
    from mining.methods import get_method

    asmk = get_method("rsift-asmk")
    store = tmp_path / "distractors"
    payloads = [(np.arange(3, dtype=np.int32), np.zeros((3, 16), np.uint8)), (np.zeros(0, np.int32),
                                                                               np.zeros((0, 16), np.uint8))]
    (store / "shards").mkdir(parents=True)
    asmk.write_payloads(store / "shards", "00000", payloads)
    write_ids(store, "00000", ["11", "12"])
    write_store_info(store, {"method": "rsift-asmk", "kind": "asmk", "count": 2, "shards": 1})
    assert check_store(store, "rsift-asmk", "asmk", None) == 2
    with pytest.raises(UserError, match="kind 'asmk', but kit.json says 'rsift-asmk' of kind 'global'"):
        check_store(store, "rsift-asmk", "global", 16)
    npz = store / "shards/00000.asmk.npz"
    good = npz.read_bytes()
    import zipfile

    with zipfile.ZipFile(npz, "w") as z:
        z.writestr("words.npy", _object_npy())
    with pytest.raises(UserError, match="objects and pickles are refused"):
        check_store(store, "rsift-asmk", "asmk", None)
    npz.unlink()
    with pytest.raises(UserError, match="00000.ids.parquet: its shard's descriptors are missing"):
        check_store(store, "rsift-asmk", "asmk", None)
    npz.write_bytes(good)
    assert check_store(store, "rsift-asmk", "asmk", None) == 2


def test_own_queries_whose_header_claims_186_tib_are_refused_before_any_allocation(made, tmp_path, capsys):
    """`--queries Q.npy` is a stranger's file too: its header is checked against the file's real
    size (as the kit's own arrays are) before numpy allocates what the header claims."""
    q = tmp_path / "q.npy"
    q.write_bytes(npy_header((2 ** 35, 1488), "<f4") + b"\0" * 64)  # 186 TiB claimed, 192 bytes on disk
    rc, err = _evaluate(made[0], made[1], capsys, "--queries", str(q))
    _one_line(rc, err, f"--queries {q}", "its header declares a float32 array of shape (34359738368, 1488)",
              "but 64 bytes follow it")
    store = tmp_path / "store"  # a store folder's shard likewise
    shutil.copytree(made[0] / "methods/gem/queries", store)
    shard = store / "shards/00000.npy"
    shard.write_bytes(npy_header((2 ** 35, 1488), "<f2") + b"\0" * 64)
    rc, err = _evaluate(made[0], made[1], capsys, "--queries", str(store))
    _one_line(rc, err, f"--queries {shard}", "its header declares a float16 array", "but 64 bytes follow it")


def test_an_npz_member_whose_zip_entry_claims_more_than_the_file_holds_is_refused(tmp_path):
    """The zip's own size field is a claim too: a stored member's size is the bytes it really
    holds, a compressed one's at most what deflate can expand them to (1032 times)."""
    import struct
    import zipfile

    from mining.errors import UserError
    from mining.kit.check import check_npz

    path = tmp_path / "model.npz"
    head = npy_header((2 ** 30 - 64,), "<f4")  # 4 GiB claimed
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pca_mean.npy", head + b"\0" * 16)
    data = bytearray(path.read_bytes())
    claimed = len(head) + 4 * (2 ** 30 - 64)
    struct.pack_into("<I", data, 22, claimed)  # the local header's uncompressed size
    central = data.rindex(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, claimed)  # and the central directory's
    path.write_bytes(bytes(data))
    assert zipfile.ZipFile(path).infolist()[0].file_size == claimed  # what the header check compared with
    with pytest.raises(UserError, match=rf"^{path}/pca_mean.npy: its zip entry claims {claimed:,} bytes but holds "
                                        r"144 bytes"):
        check_npz(path)
