"""The distractor score: how many positives of each landmark query a candidate outranks.

For method m, query q with positives P_q and candidate d,
`frac(d; q, m) = (#{p: s(q,p) < s(q,d)} + ½·#{p: s(q,p) == s(q,d)}) / |P_q|`, and
`score(d) = Σ_m Σ_q frac(d; q, m)` (docs: architecture.md, "The distractor score").

Why it is built this way:
- Streaming and exact: candidates go through in chunks aligned across methods (stores of
  different methods may hold different ids in different orders), and every per-candidate
  number is computed element-wise in a fixed order (methods, then queries), so the result
  does not depend on the chunk size or the thread count: streaming == in-memory, bit for
  bit. For global descriptors this includes the similarities themselves: BLAS rounds
  differently for different product shapes and threadings, so they are computed in fixed
  pieces aligned on each method's own candidate order, one BLAS thread per piece.
- Fast: per piece of PIECE candidates one thread decodes the float16 rows, multiplies them
  (float32 GEMM) and counts them while they are in cache (`mining.retrieval.kernels`); the counting
  uses a per-query table over a monotone bucketing of the similarity, exact by
  construction (a bucket that holds no positive tells the count directly; only values
  sharing a bucket with a positive are compared to it). `benchmarks/score.py`: total ≈
  1.8x the bare float32 GEMMs at 4.1M candidates × 70 queries × 3 methods.
- Bounded memory: per method a (chunk × n_queries) block, per candidate only the output
  columns; the per-landmark top K (the review queue) is merged chunk by chunk, and only
  the candidates entering it get their best query worked out.

The parts, one reason to change each: `alignment` (every method's candidates aligned on one
order, similarities in fixed pieces), `loop` (the chunks: `score_chunk` scores one, `score_candidates` runs them all and
fills the review queue), `budget` (a total number of review items spread over the landmarks by
risk, instead of the top K each), `output` (the files), `stage` (`mining score`: stores → inputs →
loop → files); `inputs` holds the types they share. The stores are read, and the exact count
against a query's positives made, by `mining.retrieval` (`counting`, shared with the cascade).
"""

from mining.retrieval.counting import PositiveCounter
from mining.stages.score.inputs import CandidateVectors, MethodInput, Problem
from mining.stages.score.loop import (DEFAULT_CHUNK, ChunkScores, ScoreResult, TopK, score_candidates,
                                      score_chunk)
from mining.stages.score.output import write_outputs
from mining.stages.score.stage import Inputs, method_from_stores, run
from mining.stages.score.alignment import PIECE, common_order

__all__ = [
    "DEFAULT_CHUNK", "PIECE", "CandidateVectors", "ChunkScores", "Inputs", "MethodInput",
    "PositiveCounter", "Problem", "ScoreResult", "TopK", "common_order", "method_from_stores", "run",
    "score_candidates", "score_chunk", "write_outputs",
]
