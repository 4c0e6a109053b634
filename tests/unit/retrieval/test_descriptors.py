"""Descriptor stores (mining/retrieval/descriptors.py): float16 rows decode bit-exactly."""

def test_fp16_rows_decode_bit_exactly():
    import numpy as np

    from mining.retrieval.descriptors import as_float32

    rng = np.random.default_rng(0)
    a = rng.standard_normal((257, 96)).astype(np.float16)
    a[0, :5] = [0.0, -0.0, 6e-8, np.inf, 65504]  # zeros, a subnormal, inf, max
    out = as_float32(a)
    assert out.dtype == np.float32
    assert np.array_equal(out.view(np.uint32), a.astype(np.float32).view(np.uint32))
    assert as_float32(np.zeros((0, 8), np.float16)).shape == (0, 8)
    every = np.arange(2**16, dtype=np.uint16).view(np.float16).reshape(256, 256)  # every half value
    got, want = as_float32(every), every.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32)) and np.isnan(got[nan]).all()


def test_a_shard_whose_header_claims_more_than_its_bytes_is_one_line_before_any_allocation(tmp_path):
    """A store handed over by someone else (a `--model` store, a copied run) may be cut short or
    forged: its shard's header is checked against the file's size before numpy allocates; a
    header claiming 186 TiB in a 192-byte file is a one-line refusal, not a MemoryError."""
    import numpy as np
    import pytest
    from forged import npy_header

    from mining.errors import UserError
    from mining.retrieval import descriptors

    store = tmp_path / "store"
    rows = np.eye(3, 4, dtype=np.float16)
    descriptors.write_global_shard(store, "00000", ["a", "b", "c"], rows)
    descriptors.write_store_info(store, {"method": "m", "kind": "global", "dim": 4})
    ids, got = descriptors.open_store(store).load_all()
    assert ids == ["a", "b", "c"] and np.array_equal(got, rows.astype(np.float32))
    shard = store / "shards" / "00000.npy"
    shard.write_bytes(npy_header((2 ** 35, 1488)) + b"\0" * 64)
    with pytest.raises(UserError, match=r"00000\.npy: its header declares a float16 array of shape "
                                        r"\(34359738368, 1488\).* but 64 bytes follow it; the store was changed"):
        descriptors.open_store(store).load_all()
    np.save(shard, rows[:2])
    shard.write_bytes(shard.read_bytes()[:-2])  # cut short by one value
    with pytest.raises(UserError, match=r"00000\.npy: its header declares .* but 14 bytes follow it"):
        descriptors.open_store(store).load_all()
