"""distractor-mining: rebuild R1M-style hard distractor sets for landmark retrieval benchmarks.

One module (or small subpackage) per pipeline stage; see docs/formats.md for the files
that pass between stages and docs/architecture.md for the pipeline.
"""

__version__ = "0.1.0"
