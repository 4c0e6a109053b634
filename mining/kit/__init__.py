"""The evaluation kit: everything needed to evaluate against a distractor set without its images.

`mining release --kit` writes it into RELEASE/kit/ (`mining.kit.write`); `mining evaluate
--kit KIT --landmarks GND` reproduces the run's mAP table from it and evaluates a user's own
query descriptors against it (`mining.stages.evaluate.from_kit`); `open_kit` (`mining.kit.read`) is the
loader for anyone else. docs/formats.md ("Evaluation kit") is the format's reference:

  KIT/kit.json              format, version, code and library versions, the selection's size,
                            the landmark fingerprint(s) and, per method, its kind, dimension,
                            settings, model checksum and sizes in bytes
  KIT/evaluation.json       the run's evaluation (`mining evaluate`), the table the kit reproduces
  KIT/distractors.parquet   the selected set in rank order: rank, photo_id, path, released
  KIT/methods/<method>/{queries,database,distractors}/   descriptor stores in
                            `mining.retrieval.descriptors`' format (store.json + shards/); distractors/ holds
                            the selected set's descriptors and the method's model.npz (whitening,
                            codebook) when it learns one; with several benchmarks the landmark
                            stores are in methods/<method>/benchmarks/<name>/{queries,database}/
  KIT/methods/<method>/similarities/{landmarks,distractors}.npy   the run's float32 similarities
                            (queries × database, queries × distractors), the evaluation's own bits
  KIT/README.md             how to use it
  KIT/SHA256SUMS            every other file's sha256 (`sha256sum -c SHA256SUMS`); `open_kit`
                            refuses a kit where any file differs, is missing or was added

Descriptors are kept exactly as the run's stores hold them (global vectors float16, ASMK's
visual words and 128-bit residual codes), which is what the run's evaluation computed its
similarities from; those similarities are kept too (a float32 product of another shape or on
another CPU differs in the last bits, which among a million distractors can move a positive
by a place): the kit's numbers are the run's by construction, not an approximation of them.
"""

from mining.kit.read import Kit, open_kit

__all__ = ["Kit", "open_kit"]
