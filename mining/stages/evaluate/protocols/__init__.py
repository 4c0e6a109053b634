"""Evaluation protocols (protocols.md): revisited setups, original Oxford, GLDv2, Holidays, UKBench.

Why here: each benchmark has its own ground-truth files and small rules (what is ignored,
what a missing query means); they all end in the same trapezoid AP from `metrics`. One
module per benchmark (`oxford`, `gldv2`, `holidays`, `ukbench`), named in `registry` (which
the CLI's `--protocol` choices come from) and called by `dispatch`; `readers` and `ranking`
read a user's results, `setups` holds the revisited Easy/Medium/Hard, `report` prints a table.
"""
