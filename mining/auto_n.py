"""The one place two stages meet in code: `select: {n: auto}` takes select's ranking and
measures evaluate's mAP-vs-N curve on it (`mining/stages/evaluate/choose_n.py`) to choose N. Only
the CLI and this module may import several stages (tests/unit/test_architecture.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from mining.errors import UserError
from mining.stages.evaluate.choose_n import check_args, run_choose_n
from mining.settings.options import SelectOptions
from mining.stages.select.stage import Inputs, ranked, run


def select(*, inputs: Inputs, out: Path, options: SelectOptions, descriptors: list[Path], setups: list[str],
           url_host: str | None = None) -> dict:
    """`mining select`: with `n: auto`, N is the curve's (measured with every method's
    `descriptors`, on `setups`; OUT/auto_n.json), then the selection of that N."""
    if options.n != "auto":
        return run(inputs=inputs, out=out, options=options, url_host=url_host)
    if not inputs.landmarks:
        raise UserError("--n auto needs --landmarks and --descriptors")
    if len(inputs.landmarks) > 1:
        raise UserError("--n auto measures one benchmark's curve; with several benchmarks give --n")
    check_args(options.auto_tolerance, descriptors, setups)
    r = ranked(inputs, options)
    n = run_choose_n(landmarks=Path(inputs.landmarks[0]), descriptors=descriptors, ranked_ids=r.pid[r.order], out=out,
                     tolerance=options.auto_tolerance, setups=setups)["n"]
    return run(inputs=inputs, out=out, options=replace(options, n=n), url_host=url_host, ranking=r)
