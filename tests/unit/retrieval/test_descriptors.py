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
