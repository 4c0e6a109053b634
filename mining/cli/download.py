"""CLI for `mining download` (placeholder until its stage lands; see the issue for the contract)."""

from __future__ import annotations

import argparse

from mining.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("download", help="(not implemented yet)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise UserError("this stage is not implemented yet")
