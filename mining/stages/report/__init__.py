"""`mining report`: one static HTML file (plots and thumbnails embedded) that tells a run's story,
result first.

Why one self-contained file: it is what a user mails around or opens on a laptop without the
run folder; every image is a base64 PNG/JPEG. Each section reads one stage's output and says
"not available" when that output is missing, so a partial run still gets a report.

The modules: stage (`run`, `inputs_from_run`, the sections in order), common (inputs, tables,
images), headline (title, result, provenance), charts (funnel, scores, N, evaluation), maps
(geotags over country outlines), sections (availability, thumbnails, review, near-duplicates,
leak risk, settings), audit (the measured leak rate).
"""
