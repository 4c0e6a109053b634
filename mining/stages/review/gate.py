"""What the workflow says when it stops at the human review (the run's only manual step)."""

from __future__ import annotations

from pathlib import Path

from mining.console.shell import mining_command

REVIEW = "The review queue is ready"
AUDIT = "The leak audit's sample is ready (does each image show any landmark? mining/stages/audit/stage.py)"


def next_steps(queue: str | Path, db: str | Path, images: str | Path, landmarks: str | Path | list[str],
               decisions: str | Path, what: str = REVIEW) -> str | None:
    """The message after a run that stopped for the review: how to open the app and how to
    continue. None when there is nothing to say: the decisions exist already, or the queue
    and its database are not there yet (a run stopped earlier, e.g. with --until)."""
    if Path(decisions).exists() or not (Path(queue).is_file() and Path(db).is_file()):
        return None
    landmarks = landmarks if isinstance(landmarks, list) else [landmarks]  # several benchmarks: NAME=GND each
    return (
        f"\n{what}. Open the review app:\n"
        f"  {mining_command('review', 'serve', '--db', db, '--images', images, '--landmarks', *landmarks)}\n"
        "  (several reviewers: add --reviewers alice,bob for one personal link each)\n"
        "When the review is done, export the decisions and run snakemake again:\n"
        f"  {mining_command('review', 'export', '--db', db, '--out', decisions)}\n"
    )
