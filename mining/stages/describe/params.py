"""The settings of the methods `mining describe` runs, as its command line gives them:
`--param [METHOD:]KEY=VALUE` (KEY literally the method's setting, as in the manifest's
describe.params) over the manifest's describe.params (or `--params`), each method's checked
before any work. The CLI parses; what the values mean and which are refused is here."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from mining.compute.cluster import Cluster
from mining.errors import UserError
from mining.files.yamlfile import flag_value
from mining.methods import get_method, method_class
from mining.settings.options import DescribeOptions


def parse_param(text: str) -> tuple[str | None, str, object]:
    """`[METHOD:]KEY=VALUE` -> (method or None, key, value read as YAML)."""
    target, sep, raw = text.partition("=")
    method, _, key = target.rpartition(":")
    if not sep or not key.strip():
        raise UserError(f"--param {text!r}: expected KEY=VALUE or METHOD:KEY=VALUE")
    value = flag_value(raw, f"--param {text!r}: VALUE")
    if isinstance(value, dict):
        where = f"{method.strip() or 'METHOD'}: {{{key.strip()}: {raw.strip()}}}"
        raise UserError(f"--param {text!r}: VALUE must be a number, text, true/false or a list; a mapping goes in "
                        f"--params, e.g. --params '{{{where}}}'")
    return (method.strip() or None), key.strip(), value


def split_params(method_names: Sequence[str], params: dict[str, Any]) -> list[dict[str, Any]]:
    """Each method's share of the given settings (those it has); a setting that none of the
    methods has is an error, as it is for one method."""
    known = [set(get_method(m).defaults) for m in method_names]
    unused = sorted(k for k in params if not any(k in kn for kn in known))
    if unused:
        raise UserError(f"method(s) {', '.join(method_names)}: unknown parameter(s) {unused}")
    return [{k: v for k, v in params.items() if k in kn} for kn in known]


def merged(*, methods: Sequence[str], given: Sequence[str], options: DescribeOptions, model: str | None,
           cluster: Cluster) -> DescribeOptions:
    """`options` whose `params` are each method's settings: the `given` `--param` texts
    (KEY=VALUE goes to the methods that have KEY, METHOD:KEY=VALUE to that method only) over
    `options.params[method]` (the manifest's or `--params`; with a `model` store only the paths
    of its files: a store names a model file by name and checksum, the path finds it, and the
    store gives the other settings). Every method's settings are checked (type and range),
    and, when the `cluster` is this process's, whether they can run here (a GPU asked for)."""
    params: dict[str, object] = {}  # KEY=VALUE settings
    only: dict[str, dict[str, object]] = {}  # METHOD:KEY=VALUE settings
    for text in given:
        method, key, value = parse_param(text)
        if method is None:
            params[key] = value
        elif method not in methods:
            raise UserError(f"--param {text!r}: {method} is not one of --method ({', '.join(methods)})")
        else:
            only.setdefault(method, {})[key] = value
    per_method = split_params(methods, params) if len(methods) > 1 else [params]
    for name, settings in zip(methods, per_method):
        for key, value in options.params.get(name, {}).items():
            if model is None or key in method_class(name).files:
                settings.setdefault(key, value)
        settings.update(only.get(name, {}))
        method_class(name).check_params(settings)  # type and range of every value, before any work
        if not cluster.scheduler and not cluster.slurm:  # the workers run here: e.g. is the GPU asked for here?
            method_class(name).check_here(settings)
    return replace(options, params=dict(zip(methods, per_method)))
