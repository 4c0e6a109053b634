"""Ground-truth loaders for the metrics: revisitop's `gnd_*.pkl` and the older `.mat` form.

The reader lives in `mining.datasets.landmarks` (every stage reads the same files the same way);
this module keeps the evaluation package's import path.
"""

from mining.datasets.landmarks import load_gnd

__all__ = ["load_gnd"]
