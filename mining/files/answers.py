"""What an answer file answers: the labels of review queues, their databases and their exports.

A review database answers one kind of queue (`mining/stages/review/queue_import.py`): `review`,
the score's review queue (does this photo show ITS landmark?), or `audit`, the leak audit's sample
of the selection (does it show ANY landmark? `mining/stages/audit/stage.py`). Its export
(decisions.parquet) carries, in the Parquet schema metadata:

- `queue_kind`: `review` or `audit`;
- `queue_digest`: the digest of the photos the database's queue asks about (sorted, distinct
  photo ids; `queue_digest()`), so an audit's answers name the sample they answer;
- `landmarks_fingerprint`: the landmark dataset, when the queue named it;
- `selection_digest` (audit only): the selection the sample was drawn from.

Readers take a file only for what it answers: `mining audit estimate` the answers to its own
sample, `mining select` the review's. A file without `queue_kind` (exported before answer files
were labelled, or made by hand) is refused with how to export it again, rather than guessed at.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mining.errors import UserError
from mining.files.names import AUDIT_DB, AUDIT_QUEUE, REVIEW_DB, STATS

KIND, DIGEST, FINGERPRINT, SELECTION = "queue_kind", "queue_digest", "landmarks_fingerprint", "selection_digest"
KINDS = ("review", "audit")
WHERE = {"review": f"the review's database (REVIEW/{REVIEW_DB})", "audit": f"the audit's database (AUDIT/{AUDIT_DB})"}


def stated_fingerprint(folder: Path) -> str | None:
    """The landmark dataset that a stage's FOLDER/stats.json names (score, select), or None: no
    such file, not a JSON object, no fingerprint. A file there that cannot be read is one line."""
    stats = folder / STATS
    if not stats.is_file():
        return None
    try:
        value = json.loads(stats.read_text()).get(FINGERPRINT)
    except OSError as exc:
        raise UserError(f"{stats}: cannot be read ({exc.strerror or exc}); check its permissions") from None
    except (ValueError, AttributeError):
        return None
    return str(value) if value else None


def ids_digest(ids: Any) -> str:
    """A short digest of a set's photo ids in rank order (the audit names the set it measured)."""
    return hashlib.sha256(np.asarray(ids, np.int64).tobytes()).hexdigest()[:16]


def queue_digest(photo_ids: Any) -> str:
    """The digest of the photos a queue asks about: its distinct photo ids, sorted (ids_digest)."""
    ids = np.asarray(photo_ids, np.int64) if hasattr(photo_ids, "__array__") else np.fromiter(photo_ids, np.int64)
    return ids_digest(np.unique(ids))


@dataclass(frozen=True)
class Label:
    """What a queue, a review database or an answer file is about."""

    kind: str  # review | audit
    digest: str | None = None  # queue_digest of the queue's photos
    fingerprint: str | None = None  # the landmark dataset
    selection: str | None = None  # audit: the selection the sample was drawn from

    def metadata(self) -> dict[bytes, bytes]:
        pairs = ((KIND, self.kind), (DIGEST, self.digest), (FINGERPRINT, self.fingerprint), (SELECTION, self.selection))
        return {k.encode(): str(v).encode() for k, v in pairs if v}

    def words(self) -> str:
        """`the review queue (photos digest D)` / `the audit sample D of selection S`."""
        if self.kind == "audit":
            return f"the audit sample {self.digest or '?'}" + (f" of selection {self.selection}" if self.selection else "")
        return f"the review queue (photos digest {self.digest or '?'})"


def read_label(metadata: dict[bytes, bytes] | None) -> Label | None:
    """The label in a Parquet schema's metadata; None when it has no `queue_kind`."""
    meta = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in (metadata or {}).items()}
    if not meta.get(KIND):
        return None
    return Label(meta[KIND], meta.get(DIGEST) or None, meta.get(FINGERPRINT) or None, meta.get(SELECTION) or None)


def require(path: Path, metadata: dict[bytes, bytes] | None, kind: str, digest: str | None = None) -> Label:
    """The label of the answer file `path` when it answers a `kind` queue (and, given `digest`, that
    very queue); else UserError in one line naming the file and what it answers."""
    label = read_label(metadata)
    if label is None:
        raise UserError(f"{path}: does not say which queue it answers (no `{KIND}` in its Parquet metadata: exported "
                        f"before answer files were labelled, or not made by `mining review export`); export it again "
                        f"from {WHERE[kind]}: mining review export --db DB --out {path}")
    if label.kind not in KINDS:
        raise UserError(f"{path}: answers a queue of unknown kind {label.kind!r} (expected {' or '.join(KINDS)})")
    if label.kind != kind:
        wanted = "this audit's sample" if kind == "audit" else "the review queue"
        raise UserError(f"{path}: answers {label.words()}, not {wanted}; give the export of {WHERE[kind]}")
    if digest is not None and label.digest != digest:
        raise UserError(f"{path}: answers another audit sample ({label.words()}), not this audit's sample "
                        f"{digest}; give the export of this audit's own database (`mining review import` of "
                        f"its {AUDIT_QUEUE})")
    return label
