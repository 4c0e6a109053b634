"""The name of every file one stage writes and another reads, each spelled once.

A stage writes `Path(out) / names.SCORES`, the next one reads the same constant, the run layout
(`mining.settings.layout.RunLayout`) builds the workflow's and the report's paths from them, and
the kit and the publishing floor (which may not import the settings) use them too; so renaming
an output is one line here. `tests/unit/files/test_names.py` fails when a name below is spelled as a
string anywhere else in `mining/` or `workflows/rules/` (docstrings and comments may mention it).
Only the names live here; each folder is the stage's (`RunLayout`), and a stage's own private
files (describe's plan, release's rebuild record, the kit's kit.json) stay with it, each
named once there.
"""

from __future__ import annotations

# every stage that keeps a record of its run writes it as stats.json in its own folder
STATS = "stats.json"

LANDMARKS = "landmarks.json"  # landmarks: the grouping found (landmark -> queries)
CANDIDATES = "candidates.parquet"  # geofilter
IMAGES_SUMMARY = "summary.json"  # download
IMAGE_INDEX = "index.parquet"  # download: one row per candidate photo (`mining.photos.imageindex`)
STORE = "store.json"  # describe: a descriptor store's header
SHORTLIST = "shortlist.parquet"  # cascade shortlist
SHORTLIST_STATS = "shortlist.json"  # cascade shortlist: its record
CASCADE_CHECK = "check.json"  # cascade check
NEARDUP = "neardup.parquet"  # neardup
LEAKRISK = "leakrisk.parquet"  # leakrisk
SCORES = "scores.parquet"  # score
REVIEW_QUEUE = "review_queue.parquet"  # score: what people review
DECISIONS = "decisions.parquet"  # review export (of the review's or the audit's database)
DISTRACTORS = "distractors.parquet"  # select, and audit's selection less what it found
DISTRACTORS_TXT = "distractors.txt"  # select, audit, release: the set's image paths
AUDIT_QUEUE = "audit_queue.parquet"  # audit draw
AUDIT_PLAN = "plan.json"  # audit draw: the sample's plan
AUDIT = "audit.json"  # audit estimate
EVALUATION = "evaluation.json"  # evaluate
EVALUATION_MD = "evaluation.md"  # evaluate: its tables
EVALUATION_SUMMARY = "summary.md"  # evaluate: the result for a document

WORLD = "world.json"  # demo build: the world's record (its server, the workflow and the report read it)
TRUTH = "truth.parquet"  # demo build: what each photo really is (the simulated reviewers, the preview)
REVIEW_DB = "review.sqlite"  # review import: the review's votes (the app, review export)
AUDIT_DB = "audit.sqlite"  # audit: the audit sample's votes, in the same app
REPORT = "report.html"  # report

# every name above, for the test that no other module spells one
OUTPUTS = (STATS, LANDMARKS, CANDIDATES, IMAGES_SUMMARY, IMAGE_INDEX, STORE, SHORTLIST, SHORTLIST_STATS,
           CASCADE_CHECK, NEARDUP, LEAKRISK, SCORES, REVIEW_QUEUE, DECISIONS, DISTRACTORS, DISTRACTORS_TXT,
           AUDIT_QUEUE, AUDIT_PLAN, AUDIT, EVALUATION, EVALUATION_MD, EVALUATION_SUMMARY, WORLD, TRUTH, REVIEW_DB,
           AUDIT_DB, REPORT)
