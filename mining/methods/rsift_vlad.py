"""`rsift-vlad`: RootSIFT aggregated into one VLAD vector per image, PCA-whitened to 512-d.

Why this third family: it is a *global* descriptor built from *local* hand-crafted
features, so it fails differently from both others. Unlike the CNN it sees no semantics
(no "this is a gothic façade"), only local gradient statistics; unlike ASMK it has no
selective matching: every descriptor votes into a small (64-word) codebook, so a candidate
full of repeated windows, columns or brick texture resembles a landmark even without a
single precise correspondence. Such "texture-alike" candidates are exactly the distractors
a burstiness-sensitive global system falls for (Jégou et al. 2010/2012, the compact
representations R1M-era systems also used). Storage and scoring are those of a global
method: float16 rows and a GEMM.

Recipe: k-means codebook (faiss, k = 64) on candidate RootSIFTs; per image, residual sums
per word, intra-normalisation (Arandjelović & Zisserman 2013), signed square root, L2;
PCA-whitening with shrinkage to `dim` (512) learned on the candidates' VLADs; L2. With
fewer than 2 x `dim` training images (tiny demo worlds) the raw k x 128 VLAD is kept.
"""

from __future__ import annotations


import numpy as np

from mining.retrieval.descriptors import GLOBAL, l2_normalize
from mining.errors import UserError
from mining.methods.base import Param, apply_pca_whitening, fit_pca_whitening_if_enough, small_pool_reason
from mining.methods.rootsift import RootSiftMethod


def vlad(des: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Intra-normalised, power-normalised, L2-normalised VLAD (k * 128,) of one image."""
    k, d = centroids.shape
    v = np.zeros((k, d), np.float32)
    if len(des):
        dist = (des * des).sum(1, keepdims=True) - 2 * des @ centroids.T + (centroids * centroids).sum(1)
        a = dist.argmin(1)
        np.add.at(v, a, des - centroids[a])
    v = l2_normalize(v, axis=1)
    v = np.sign(v) * np.sqrt(np.abs(v))
    return l2_normalize(v.reshape(-1))


class RSiftVlad(RootSiftMethod):
    name = "rsift-vlad"
    kind = GLOBAL
    defaults = {
        "max_side": 1024,
        "max_features": 1000,
        "vocabulary": 64,
        "train_descriptors": 300_000,
        "dim": 512,
        "whiten_shrink": 0.1,
        "spatial_verification": None,  # {top_k, min_inliers}: keypoints kept, top k re-ranked (mining.retrieval.spatial)
    }
    domains = {
        **RootSiftMethod.domains,
        "vocabulary": Param("int", 1),
        "dim": Param("int", 1),
        "whiten_shrink": Param("float", 0),
    }

    def small_pool(self, sample: int) -> str | None:
        return small_pool_reason(sample, int(self.params["dim"]), "dim", "the codebook is learned")

    def fit(self, features: list[np.ndarray], seed: int = 0) -> dict[str, np.ndarray]:
        import faiss

        k = int(self.params["vocabulary"])
        x = self.training_rows(features, k, seed)
        km = faiss.Kmeans(x.shape[1], k, niter=20, seed=seed, verbose=False)
        km.train(x)
        centroids = np.ascontiguousarray(km.centroids, np.float32)
        vlads = np.stack([vlad(f, centroids) for f in features])
        pca = fit_pca_whitening_if_enough(vlads, int(self.params["dim"]), float(self.params["whiten_shrink"]), self.name)
        self.state = {"centroids": centroids, **pca}
        return self.state

    def aggregate(self, des: np.ndarray) -> np.ndarray:
        """The (whitened) VLAD of one image's RootSIFTs."""
        if self.state is None:
            raise UserError("rsift-vlad: vocabulary missing (describe candidates first, pass --model)")
        v = vlad(des, self.state["centroids"])
        return apply_pca_whitening(v[None, :], self.state)[0] if "pca_proj" in self.state else v

    def dim(self) -> int:
        if self.state is None:
            return int(self.params["dim"])
        return int(self.state["pca_proj"].shape[1]) if "pca_proj" in self.state else int(self.state["centroids"].size)
