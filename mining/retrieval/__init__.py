"""The store and retrieval core: descriptor stores, similarities, compiled kernels, exact metrics, spatial verification; it knows no method (what it needs from one it is handed)."""
