"""`rsift-asmk`: RootSIFT aggregated with ASMK* (Tolias, Avrithis & Jégou 2013; `asmk` package).

The codebook is trained with `asmk.ASMKMethod.train_codebook` on RootSIFTs of a sample of
candidates. Each image is stored as its visual words and, per word, the binarised
aggregated residual (128 bits); database images use single assignment, queries multiple
assignment (5 words per descriptor), as in asmk's own configuration.

Scoring computes the ASMK kernel directly from those payloads, one database shard at a
time (what `mining score` streams): for every visual word shared by a query and a database
image, similarity = 1 - 2 * hamming / 128, kept if >= tau (0), raised to alpha (3), summed
and normalised by sqrt(#words) of both images, i.e. asmk's `IVF.search` without idf, but
dense over the shard and without building an inverted file per shard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from mining.files import atomic
from mining.errors import UserError
from mining.methods.base import Param
from mining.methods.rootsift import RootSiftMethod

_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], np.uint8)
_MAX_PAIRS = 4_000_000  # word matches scored at once; bounds memory of `similarity`


class AsmkPayload(NamedTuple):
    """Aggregated images: image i owns rows offsets[i]:offsets[i+1] of words/bits."""

    words: np.ndarray  # int32 (m,)
    bits: np.ndarray  # uint8 (m, 16): packed binary residuals
    offsets: np.ndarray  # int64 (n + 1,)

    @property
    def n(self) -> int:
        return len(self.offsets) - 1


def concat(blocks: list[AsmkPayload]) -> AsmkPayload:
    if not blocks:
        return AsmkPayload(np.zeros(0, np.int32), np.zeros((0, 16), np.uint8), np.zeros(1, np.int64))
    sizes = np.concatenate([np.diff(b.offsets) for b in blocks])
    return AsmkPayload(
        np.concatenate([b.words for b in blocks]).astype(np.int32),
        np.concatenate([b.bits for b in blocks]).astype(np.uint8),
        np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
    )


def asmk_similarity(q: AsmkPayload, d: AsmkPayload, alpha: float, tau: float) -> np.ndarray:
    """Dense ASMK* kernel (n_q, n_d), normalised by the images' self-similarity."""
    out = np.zeros((q.n, d.n), np.float64)
    if q.n == 0 or d.n == 0 or len(d.words) == 0:
        return out.astype(np.float32)
    nbits = d.bits.shape[1] * 8
    d_img = np.repeat(np.arange(d.n), np.diff(d.offsets))
    order = np.argsort(d.words, kind="stable")
    dw, dimg, dbits = d.words[order], d_img[order], d.bits[order]
    lo = np.searchsorted(dw, q.words, "left")
    cnt = np.searchsorted(dw, q.words, "right") - lo
    q_img = np.repeat(np.arange(q.n), np.diff(q.offsets))
    # batches of query images so that at most ~_MAX_PAIRS word matches are expanded at once
    cs = np.concatenate([[0], np.cumsum(cnt)])
    per_q = cs[q.offsets[1:]] - cs[q.offsets[:-1]]
    start = 0
    while start < q.n:
        stop, acc = start, 0
        while stop < q.n and (stop == start or acc + per_q[stop] <= _MAX_PAIRS):
            acc += per_q[stop]
            stop += 1
        rows = slice(q.offsets[start], q.offsets[stop])
        c = cnt[rows]
        if c.sum():
            qi = np.repeat(np.arange(rows.start, rows.stop), c)
            first = np.repeat(lo[rows] - (np.cumsum(c) - c), c)
            di = first + np.arange(len(qi))
            ham = _POPCOUNT[np.bitwise_xor(q.bits[qi], dbits[di])].sum(1, dtype=np.int32)
            sim = 1.0 - 2.0 * ham / nbits
            keep = sim >= tau
            w = np.power(sim[keep], alpha)
            flat = (q_img[qi][keep] - start) * d.n + dimg[di][keep]
            out[start:stop] += np.bincount(flat, weights=w, minlength=(stop - start) * d.n).reshape(stop - start, d.n)
        start = stop
    qn = np.sqrt(np.maximum(np.diff(q.offsets), 1))
    dn = np.sqrt(np.maximum(np.diff(d.offsets), 1))
    return (out / qn[:, None] / dn[None, :]).astype(np.float32)


class RSiftAsmk(RootSiftMethod):
    name = "rsift-asmk"
    kind = "asmk"
    defaults = {
        "max_side": 1024,
        "max_features": 1000,
        "codebook_size": 512,
        "train_descriptors": 500_000,
        "query_assignment": 5,
        "alpha": 3.0,
        "tau": 0.0,
        "spatial_verification": None,  # {top_k, min_inliers}: keypoints kept, top k re-ranked (mining.retrieval.spatial)
    }
    domains = {
        **RootSiftMethod.domains,
        "codebook_size": Param("int", 2),
        "query_assignment": Param("int", 1),
        "alpha": Param("float", 0),
        "tau": Param("float", -1, 1),
    }

    def fit(self, features: list[np.ndarray], seed: int = 0) -> dict[str, np.ndarray]:
        k = int(self.params["codebook_size"])
        x = self.training_rows(features, k, seed)
        from asmk import ASMKMethod

        asmk = ASMKMethod.initialize_untrained({"index": {"gpu_id": None}, "train_codebook": {"codebook": {"size": k}}})
        trained = asmk.train_codebook(x)
        self.state = {"centroids": np.ascontiguousarray(trained.codebook.centroids, np.float32)}
        self._kernel = None
        return self.state

    def _asmk(self) -> tuple[Any, Any]:
        """asmk's codebook (faiss-indexed) and binary kernel, built once from the state."""
        if getattr(self, "_kernel", None) is None:
            if self.state is None:
                raise UserError("rsift-asmk: codebook missing (describe candidates first, pass --model)")
            from asmk.codebook import Codebook
            from asmk.index import initialize_index
            from asmk.kernel import ASMKKernel

            c = self.state["centroids"]
            cdb = Codebook(initialize_index(None), size=int(c.shape[0]))
            cdb.index(np.ascontiguousarray(c, np.float32))
            self._kernel = (cdb, ASMKKernel(cdb, binary=True))
        return self._kernel

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        self._kernel = None

    def aggregate(self, des: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Visual words and binary residuals of one image's RootSIFTs."""
        cdb, kern = self._asmk()
        if len(des) == 0:
            return np.zeros(0, np.int32), np.zeros((0, 16), np.uint8)
        ma = int(self.params["query_assignment"]) if self.query else 1
        des, word_ids = cdb.quantize(des, multiple_assignment=ma)
        bits, words = kern.aggregate_image(des, word_ids)
        # asmk packs 128 signs into 4 uint32; stored as 16 bytes (popcount is per byte)
        return words.astype(np.int32), np.ascontiguousarray(bits).view(np.uint8).reshape(len(words), -1)

    def write_payloads(self, shards_dir: Path, shard: str, payloads: list[tuple[np.ndarray, np.ndarray]]) -> None:
        sizes = [len(w) for w, _ in payloads]
        words = np.concatenate([w for w, _ in payloads]) if payloads else np.zeros(0, np.int32)
        bits = np.concatenate([b for _, b in payloads]) if payloads else np.zeros((0, 16), np.uint8)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        with atomic.atomic_path(Path(shards_dir) / f"{shard}.asmk.npz") as tmp:
            with open(tmp, "wb") as f:
                np.savez(f, words=words.astype(np.int32), bits=bits.astype(np.uint8), offsets=offsets)

    def load_payload(self, shards_dir: Path, shard: str, info: dict[str, Any]) -> AsmkPayload:
        with np.load(Path(shards_dir) / f"{shard}.asmk.npz") as z:
            return AsmkPayload(z["words"], z["bits"], z["offsets"])

    def concat_payloads(self, blocks: list[AsmkPayload], info: dict[str, Any]) -> AsmkPayload:
        return concat(blocks)

    def take_rows(self, payload: AsmkPayload, rows: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        o = payload.offsets
        return [(payload.words[o[r]:o[r + 1]], payload.bits[o[r]:o[r + 1]]) for r in np.asarray(rows, np.int64)]

    def similarity(self, queries: AsmkPayload, database: AsmkPayload, info: dict[str, Any]) -> np.ndarray:
        p = {**self.defaults, **info.get("params", {})}
        return asmk_similarity(queries, database, float(p["alpha"]), float(p["tau"]))
