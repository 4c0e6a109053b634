"""`python -m mining.methods.export MODULE:CALLABLE OUT.onnx ...`: a torch model exported to what
`onnx-global` reads, checked against torch, its settings in `OUT.onnx.json` (the logic:
`mining/methods/onnx_export.py`; docs/onnx-models.md). Run where torch and the model's library
are installed; the mining machine needs only the two files."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from mining.errors import UserError
from mining.methods.onnx_export import SAME_PADDING, Request, main_export
from mining.methods.onnx_parity import TOLERANCE
from mining.methods.onnx_run import OUTPUTS

PROG = "python -m mining.methods.export"


def _size(text: str) -> tuple[int, int]:
    h, sep, w = text.lower().partition("x")
    if not sep or not h.isdigit() or not w.isdigit() or int(h) < 1 or int(w) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not HEIGHTxWIDTH (e.g. 224x288)")
    return int(h), int(w)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("factory", metavar="MODULE:CALLABLE", help="returns the torch nn.Module (or path/to/file.py:CALLABLE)")
    p.add_argument("out", type=Path, metavar="OUT.onnx", help="the model file; its settings go to OUT.onnx.json")
    p.add_argument("--input", choices=("long_side", "patch_multiple", "square"), default="long_side",
                   help="long_side: any height and width; patch_multiple: multiples of --patch; square: fixed --size")
    p.add_argument("--size", type=int, default=224, help="square's side (default 224)")
    p.add_argument("--patch", type=int, default=14, help="patch_multiple's patch (default 14)")
    p.add_argument("--stride", type=int, default=32, help="long_side: the network's total stride, for the sizes "
                   "checked (default 32)")
    p.add_argument("--mean", type=float, nargs=3, default=[0.485, 0.456, 0.406], help="on 0..1 values (default ImageNet)")
    p.add_argument("--std", type=float, nargs=3, default=[0.229, 0.224, 0.225])
    p.add_argument("--channels", choices=("RGB", "BGR"), default="RGB")
    p.add_argument("--output", choices=OUTPUTS, required=True, help="what onnx-global makes of the output it takes")
    p.add_argument("--output-name", help="that output (default: the first of the rank --output needs)")
    p.add_argument("--prefix-tokens", type=int, default=1, help="mean_tokens: leading tokens skipped (CLS + registers)")
    p.add_argument("--p", type=float, default=3.0, help="feature_map: GeM's p")
    p.add_argument("--outputs", nargs="+", default=[], metavar="FIELD",
                   help="the model's outputs to export (a mapping's keys; default every tensor it returns)")
    p.add_argument("--trace-size", type=_size, metavar="HxW", help="the size the graph is traced at")
    p.add_argument("--check-size", type=_size, action="append", default=[], metavar="HxW",
                   help="check at these sizes instead of the default set (repeat the flag)")
    p.add_argument("--tolerance", type=float, default=TOLERANCE, help=f"max |onnx - torch| (default {TOLERANCE:g})")
    p.add_argument("--same-padding", action="append", default=[], metavar="CLASS",
                   help=f"another Conv2d class that pads TF 'same' from the input's size (known: {', '.join(SAME_PADDING)})")
    return p


def request(args: argparse.Namespace) -> Request:
    settings = {"input": args.input, "size": args.size, "patch": args.patch, "mean": args.mean, "std": args.std,
                "channels": args.channels, "output": args.output, "output_name": args.output_name,
                "prefix_tokens": args.prefix_tokens, "p": args.p}
    return Request(factory=args.factory, out=args.out, settings=settings, fields=tuple(args.outputs),
                   trace=args.trace_size, sizes=tuple(args.check_size), stride=args.stride,
                   tolerance=args.tolerance, same_padding=SAME_PADDING + tuple(args.same_padding))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")  # not the exporter's INFO chatter
    try:
        print(main_export(request(args)))
    except UserError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
