"""distractor-mining: rebuild R1M-style hard distractor sets for landmark retrieval benchmarks.

One package per pipeline stage (`stages/`) over a shared floor of packages named for what they
are (`retrieval/`, `datasets/`, `evidence/`, `publishing/`, `settings/`, `files/`, ...); see
docs/architecture.md for the pipeline and its layers, docs/formats.md for the files that pass
between stages.
"""

__version__ = "0.1.0"

from mining import pins as _pins

_pins.pin()  # before any numeric library loads: one set on every CPU (mining/pins.py)
