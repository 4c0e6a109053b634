"""`mining cascade`: describe an expensive method only where it matters (`stage.py`:
`run_shortlist` before it is described, `run_check` after)."""
