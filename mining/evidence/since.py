"""Dates as evidence: a landmark that exists only from a date cannot be shown by a photo taken before it.

A landmark may carry `since: YYYY-MM-DD` in the ground truth (a key of its queries' entries, beside
`bbx`, `easy`, `hard`; queries of one landmark that disagree: the earliest date counts). A candidate
whose YFCC100M `date_taken` is before that day has no leak risk for that landmark: `mining score`
leaves it out of that landmark's review queue (the next one takes its place) and `mining leakrisk`
does not compare it with that landmark's images. A photo without a readable date_taken is never
exempt. This is ILIAS's guarantee (objects that appeared after 2014), where it applies; the score
itself is unchanged (such a photo stays a valid, and safe, distractor). Shared by score and leakrisk.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mining.datasets.benchmarks import qualify
from mining.errors import UserError
from mining.files.tables import read_table

NOT_A_DATE = np.datetime64("NaT", "D")


_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def parse_day(value: Any, where: str) -> np.datetime64:
    """A `since` value as a day: text that is exactly a calendar date YYYY-MM-DD, or a
    `datetime.date`; anything else (a time, a zone, trailing text, a datetime) is refused in one line."""
    if type(value) is datetime.date:
        value = value.isoformat()
    try:
        if not isinstance(value, str) or not _DAY.fullmatch(value):
            raise ValueError(value)
        datetime.date.fromisoformat(value)  # a day that exists (no 2016-02-30)
        return np.datetime64(value, "D")
    except ValueError:
        raise UserError(f"{where}: since must be a date YYYY-MM-DD, got {value!r} (a calendar day, "
                        "nothing before or after it)") from None


def landmark_since(dataset: Any, qualify: Any = None) -> dict[str, np.datetime64]:
    """landmark → the day it exists from, for the landmarks of `dataset` whose queries carry `since`.
    `qualify(name)` names a landmark in the run's files (several benchmarks: `<benchmark>/<name>`)."""
    out: dict[str, np.datetime64] = {}
    for lm, queries in dataset.groups:
        for q in queries:
            value = dataset.gnd[q].get("since")
            if value is None or value == "":
                continue
            name = qualify(lm) if qualify else lm
            day = parse_day(value, f"{dataset.path}: landmark {name} (query {dataset.qimlist[q]})")
            out[name] = min(out.get(name, day), day)
    return out


def of_benchmarks(benchmarks: Any, datasets: Any) -> dict[str, np.datetime64]:
    """`landmark_since` of every benchmark of a run, landmarks named as in its files (mining.datasets.benchmarks)."""
    several = len(benchmarks) > 1
    return {k: v for b, ds in zip(benchmarks, datasets)
            for k, v in landmark_since(ds, lambda lm, b=b: qualify(b.name, lm, several)).items()}


def days_taken(candidates: Path | None, photo_ids: np.ndarray) -> np.ndarray:
    """The day each photo was taken (YFCC100M date_taken, `YYYY-MM-DD hh:mm:ss...`), NaT when unknown
    or impossible (`plausible`); all NaT without a candidates file."""
    out = np.full(len(photo_ids), NOT_A_DATE)
    if candidates is None:
        return out

    table = read_table(candidates, ("photo_id", "date_taken"), "candidates", hint="made by `mining geofilter`")
    ids = table.column("photo_id").to_numpy().astype(np.int64)
    text = np.array([t[:10] if isinstance(t, str) and len(t) >= 10 else "NaT" for t in
                     table.column("date_taken").to_pylist()], dtype=object)
    days = plausible(np.array([_day(t) for t in text], dtype="datetime64[D]"))
    order = np.argsort(ids, kind="stable")
    ids, days = ids[order], days[order]
    pos = np.clip(np.searchsorted(ids, photo_ids), 0, max(len(ids) - 1, 0))
    found = (pos < len(ids)) & (ids[pos] == photo_ids) if len(ids) else np.zeros(len(photo_ids), bool)
    out[found] = days[pos[found]]
    return out


FIRST_PHOTOGRAPH = np.datetime64("1826-01-01", "D")
# clocks that were never set: the Unix and FAT epochs, the year-2000 reset of many cameras
CAMERA_DEFAULTS = np.array(["1970-01-01", "1980-01-01", "2000-01-01"], dtype="datetime64[D]")


def plausible(days: np.ndarray, today: datetime.date | None = None) -> np.ndarray:
    """`days` with the impossible ones made unknown (NaT): after today (YFCC100M has 4501-01-01), before
    the first photograph, or a camera's unset clock. An unknown day never exempts a photo, and never
    decides what "later than every candidate" means (`check_late`)."""
    now = np.datetime64(today or datetime.date.today(), "D")
    bad = (days > now) | (days < FIRST_PHOTOGRAPH) | np.isin(days, CAMERA_DEFAULTS)
    return np.where(bad, NOT_A_DATE, days)


def _day(text: str) -> np.datetime64:
    try:
        return np.datetime64(text, "D")
    except ValueError:
        return NOT_A_DATE


def before(taken: np.ndarray, since: np.datetime64) -> np.ndarray:
    """Photos taken (known) before `since`: no leak risk for that landmark (NaT compares False)."""
    return taken < since


def check_late(since: dict[str, np.datetime64], taken: np.ndarray | None, allow: bool = False,
               today: datetime.date | None = None) -> list[str]:
    """The landmarks whose `since` day is later than every dated candidate's day (`taken`), so
    that every dated candidate is exempt for them: refused, naming the first, unless `allow`
    (`score.late_since: allow`: ILIAS-style landmarks that appeared after the photos were taken);
    then returned (stats.json marks them). A day later than today is always refused: a landmark
    cannot exist from a day to come (a typo, a wrong century)."""
    now = np.datetime64(today or datetime.date.today(), "D")
    dated = taken[~np.isnat(taken)] if taken is not None else np.zeros(0, "datetime64[D]")
    latest = dated.max() if dated.size else None
    late = []
    for lm, day in sorted(since.items()):
        if day > now:
            raise UserError(f"landmark {lm}: since {day} is later than today ({now}); check the date in the "
                            "ground truth")
        if latest is not None and day > latest:
            if not allow:
                raise UserError(f"landmark {lm}: since {day} is later than every candidate's date_taken (the "
                                f"latest: {latest}), so none of them would be reviewed for it; check the date in "
                                "the ground truth, or, if it is meant, allow it: score.late_since: allow "
                                "(--late-since allow)")
            late.append(lm)
    return late


def exempt_counts(taken: np.ndarray, since: dict[str, np.datetime64], late: Sequence[str] = ()) -> dict[str, Any]:
    """What stats.json says: per landmark its date and the candidates taken before it (`late`:
    true for a landmark later than every candidate, allowed by `check_late`), and how many
    candidates are exempt for at least one landmark (`candidates_without_date`: no date, or an
    impossible one)."""
    per = {lm: {"since": str(day), "candidates_before": int(before(taken, day).sum()),
                **({"late": True} if lm in late else {})} for lm, day in since.items()}
    anyone = np.zeros(len(taken), bool)
    for day in since.values():
        anyone |= before(taken, day)
    return {"landmarks": per, "candidates_exempt_for_some_landmark": int(anyone.sum()),
            "candidates_without_date": int(np.isnat(taken).sum())}
