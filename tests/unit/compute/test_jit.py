"""Compiled kernels (mining/compute/jit.py): they work without a writable numba cache."""

import subprocess
import sys

from paths import ROOT


def test_kernels_work_without_a_writable_numba_cache(tmp_path):
    """A read-only install with a read-only HOME leaves numba no cache location; it would
    refuse `cache=True` at import. The kernels compile per run instead."""
    import os

    (tmp_path / "nowhere.py").write_text(
        "from numba.core.caching import InTreeCacheLocator\n"
        "class Nowhere(InTreeCacheLocator):\n"
        "    @classmethod\n"
        "    def from_function(cls, py_func, py_file):\n"
        "        return None\n")
    code = ("import numpy as np\n"
            "from mining.retrieval.descriptors import as_float32\n"
            "from mining.stages.score import PositiveCounter\n"
            "assert as_float32(np.array([[1.5, -2]], np.float16)).tolist() == [[1.5, -2.0]]\n"
            "c = PositiveCounter.build(np.array([0.1, 0.5], np.float32))\n"
            "print(c.count_doubled(np.array([0.0, 0.3, 0.5, 0.9], np.float32)).tolist())\n")
    env = {**os.environ, "NUMBA_CACHE_LOCATOR_CLASSES": "nowhere.Nowhere",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[0, 2, 3, 4]"
