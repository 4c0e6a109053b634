"""Several benchmarks in one run (R1M was mined for ROxford and RParis together): their
names, how their landmarks and queries are named in the run's files, where their descriptor
stores are, and the fingerprint that ties a run's files to its ground truths.

A benchmark is a ground-truth file (`gnd_<name>.pkl`, its images in `jpg/` beside it) and a
name (by default the file's stem without `gnd_`). The manifest's `landmarks:` is one path (one
benchmark) or a list of `{gnd, name}`; a stage's `--landmarks` takes one or more
`[NAME=]PATH`. Everything that depends on "one or several" is decided here:
- with one benchmark nothing changes: landmark and query names are the ground truth's, the
  landmark stores are DESC/<method>/{queries,database}, the fingerprint is the dataset's;
- with several, landmark and query names are `<benchmark>/<name>` (`roxford5k/all_souls`)
  in every file (scores, review queue, decisions, evaluation, report), each benchmark's
  stores are DESC/<method>/benchmarks/<benchmark>/{queries,database} (candidates are
  described once, DESC/<method>/candidates), and the fingerprint covers every benchmark.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from mining.errors import UserError
from mining.datasets.landmarks import load_landmarks
from mining.schemas.loader import schema

STORES = "benchmarks"  # DESC/<method>/benchmarks/<name>/{queries,database} with several


@dataclass(frozen=True)
class Benchmark:
    """One landmark benchmark of a run: its name and its ground-truth file."""

    name: str
    gnd: str


@lru_cache(maxsize=1)
def _name_rule() -> tuple[re.Pattern[str], str]:
    """The benchmark name's pattern and its words: the manifest schema's `benchmark_name`."""
    rule = schema()["$defs"]["benchmark_name"]
    return re.compile(rule["pattern"]), rule["errorMessage"]


def valid_name(name: str) -> bool:
    return bool(_name_rule()[0].match(name))


def default_name(gnd: str | Path) -> str:
    """`data/roxford5k/gnd_roxford5k.pkl` → `roxford5k` (a folder: its one gnd_*.pkl's)."""
    p = Path(gnd)
    if p.is_dir():
        found = sorted(p.glob("gnd_*.pkl"))
        p = found[0] if len(found) == 1 else p
    stem = p.stem
    return stem[4:] if stem.startswith("gnd_") else stem


def make(gnd: str | Path, name: str | None = None) -> Benchmark:
    """A benchmark, its name given or the file's (checked by `check_names` when it is used:
    with several benchmarks)."""
    return Benchmark(default_name(gnd) if name is None else name, str(gnd))


def check_names(benchmarks: Sequence[Benchmark]) -> None:
    """Several benchmarks: every name a valid name (it becomes a folder and a prefix), no two alike.
    One benchmark's name is never used (its files carry the ground truth's own names), so any
    file name goes."""
    if len(benchmarks) < 2:
        return
    for b in benchmarks:
        if not valid_name(b.name):
            raise UserError(f"benchmark name {b.name!r} (of {b.gnd}): {_name_rule()[1]}")
    check_unique(benchmarks)


def parse_arg(text: str | Path) -> Benchmark:
    """A `--landmarks` value: `NAME=PATH` or `PATH` (the name is the file's)."""
    text = str(text)
    head, sep, tail = text.partition("=")
    if sep and valid_name(head) and tail and not Path(text).exists():
        return make(tail, head)
    return make(text)


def as_list(landmarks: Any) -> list[Benchmark]:
    """Benchmarks from what a stage was given: a path, a `NAME=PATH`, a Benchmark, or a list
    of these; names must differ."""
    items = landmarks if isinstance(landmarks, (list, tuple)) else [landmarks]
    out = [b if isinstance(b, Benchmark) else parse_arg(b) for b in items]
    if not out:
        raise UserError("give at least one landmark ground truth (--landmarks)")
    check_names(out)
    return out


def check_unique(benchmarks: Sequence[Benchmark]) -> None:
    """Two benchmarks of one run never share a name (their landmarks would be mixed up)."""
    seen: dict[str, str] = {}
    for b in benchmarks:
        if b.name in seen:
            raise UserError(f"two benchmarks are named {b.name!r} ({seen[b.name]} and {b.gnd}); "
                            "give one of them another name (`name:` in the manifest, NAME=PATH on the command line)")
        seen[b.name] = b.gnd


def from_manifest(value: Any, demo_gnds: Sequence[tuple[str, str]] = ()) -> list[Benchmark]:
    """The manifest's `landmarks:` as benchmarks: a path, a list of {gnd, name}, or `demo`
    (then `demo_gnds`, the demo world's (name, gnd) pairs)."""
    if value == "demo":
        return [make(gnd, name) for name, gnd in demo_gnds]
    if isinstance(value, str):
        return [make(value)]
    out = [make(item["gnd"], item.get("name")) for item in value]
    check_names(out)
    return out


def demo_names(cities: int) -> list[str]:
    """The demo world's benchmark names: `demo` for its one city, else city1, city2, ..."""
    return ["demo"] if cities == 1 else [f"city{k + 1}" for k in range(cities)]


def qualify(bench: str, name: str, several: bool) -> str:
    """A landmark's (or query's) name in the run's files: `<benchmark>/<name>` with several."""
    return f"{bench}/{name}" if several else name


SCORE_COLUMN = "benchmark_score_"


def score_column(bench: str) -> str:
    """scores.parquet's (and distractors.parquet's) column of one benchmark's part of the
    score (runs with several benchmarks)."""
    return SCORE_COLUMN + bench


def is_score_column(column: str) -> str | None:
    """The benchmark whose part of the score `column` is; None for another column."""
    return column[len(SCORE_COLUMN):] if column.startswith(SCORE_COLUMN) else None


def store_dir(method_dir: str | Path, bench: str | None) -> Path:
    """The folder holding a benchmark's queries/ and database/ stores of one method
    (None: the run's only benchmark, DESC/<method> itself)."""
    return Path(method_dir) if bench is None else Path(method_dir) / STORES / bench


def fingerprint(named: Sequence[tuple[str, str]]) -> str:
    """The run's landmark fingerprint from (benchmark name, dataset fingerprint) pairs: the
    dataset's own with one benchmark, else a hash of every name and fingerprint in order."""
    if len(named) == 1:
        return named[0][1]
    h = hashlib.sha256("\n".join(f"{n}\t{fp}" for n, fp in named).encode())
    return h.hexdigest()[:16]


def load_all(benchmarks: Sequence[Benchmark]) -> list[Any]:
    """Each benchmark's LandmarkDataset (validated); the same ground truth twice is refused
    (its queries would count twice in every score)."""
    datasets = [load_landmarks(b.gnd) for b in benchmarks]
    seen: dict[str, str] = {}
    for b, ds in zip(benchmarks, datasets):
        fp = ds.fingerprint()
        if fp in seen:
            raise UserError(f"benchmarks {seen[fp]!r} and {b.name!r} have the same ground truth ({b.gnd})")
        seen[fp] = b.name
    return datasets


def run_fingerprint(landmarks: Any) -> str:
    """`fingerprint` of what a stage was given (`as_list`'s forms)."""
    benchmarks = as_list(landmarks)
    return fingerprint([(b.name, ds.fingerprint()) for b, ds in zip(benchmarks, load_all(benchmarks))])


def run_benchmarks(m: Any, layout: Any = None) -> list[tuple[str, Path]]:
    """(name, gnd) of each benchmark of a loaded manifest that has several; [] with one (the
    demo world's cities need the run's `layout`, a RunLayout)."""
    demo = [(c, layout.world_city_gnd(c)) for c in demo_names(m.demo["benchmarks"])] if m.demo and layout else []
    found = m.benchmarks(demo)
    return [(b.name, Path(b.gnd)) for b in found] if len(found) > 1 else []


def prefixed_datasets(several: Sequence[tuple[str, Path]], single: Path | None) -> list[tuple[str, Any]]:
    """(name prefix, LandmarkDataset) of each benchmark: ("<name>/", its dataset) for each of
    `several` whose file exists, else ("", `single`'s dataset) when given."""
    if several:
        return [(f"{name}/", load_landmarks(gnd)) for name, gnd in several if Path(gnd).exists()]
    return [("", load_landmarks(single))] if single else []


class Combined:
    """Several benchmarks' queries as one dataset, for what shows a query by its index in the
    run's query list (the review app's query crops): names `<benchmark>/<name>`, each image
    in its own benchmark's jpg/ (`locate`), the run's fingerprint."""

    def __init__(self, benchmarks: Sequence[Benchmark], datasets: Sequence[Any]):
        self.benchmarks, self.datasets = list(benchmarks), list(datasets)
        self.path = Path(" + ".join(b.gnd for b in benchmarks))
        self.qimlist = [qualify(b.name, q, True) for b, ds in zip(benchmarks, datasets) for q in ds.qimlist]
        self._where = [(ds, j) for ds in datasets for j in range(len(ds.qimlist))]
        self._bench = [b.name for b, ds in zip(benchmarks, datasets) for _ in ds.qimlist]

    def locate(self, i: int) -> tuple[Any, int]:
        """(the benchmark's LandmarkDataset, the query's index there) of run query i."""
        return self._where[i]

    def query_landmark(self, i: int) -> str:
        ds, j = self._where[i]
        return qualify(self._bench[i], ds.query_landmark(j), True)

    @property
    def landmarks(self) -> list[str]:
        return [qualify(b.name, lm, True) for b, ds in zip(self.benchmarks, self.datasets) for lm in ds.landmarks]

    def fingerprint(self) -> str:
        return fingerprint([(b.name, ds.fingerprint()) for b, ds in zip(self.benchmarks, self.datasets)])


def dataset_view(landmarks: Any) -> Any:
    """One benchmark's LandmarkDataset, or several benchmarks' `Combined` view."""
    benchmarks = as_list(landmarks)
    datasets = load_all(benchmarks)
    return datasets[0] if len(datasets) == 1 else Combined(benchmarks, datasets)
