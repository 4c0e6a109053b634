"""`mining ingest`: YFCC100M `yfcc100m_dataset` files → a typed Parquet dataset.

Inputs: the TSV files (25 or 23 fields; plain, .bz2 or .gz) and the SQLite file
(`yfcc100m_dataset.sql`, told apart by its header bytes: mining/stages/ingest/sqlite.py), which give
the same output for the same rows.

Output folder (see docs/formats.md): `part-NNNNN.parquet`, `quarantine.tsv` (file, line,
reason, raw line of every rejected row; backslash escapes, read it with `read_quarantine`) and
`stats.json` (written last: its presence means
the folder is complete). Everything is first written to a hidden staging folder inside OUT
and moved into place at the end, so OUT never mixes two runs; rerunning on unchanged inputs
is a no-op. A file whose every row is rejected stops the run (nothing is written).

Memory stays bounded: files are read in blocks of `block_size` bytes (SQLite: rowid ranges of
about as many bytes), at most a few blocks are in flight (parsed on a worker thread while the
previous one is written), and the places and hash files are merged in a sliding window. A
line longer than `yfcc.MAX_LINE` is quarantined without being held whole (`decompress.iter_capped`).

`stage` is the stage (`run`, `IngestOptions`); the parts are listed in docs/architecture.md.
"""
