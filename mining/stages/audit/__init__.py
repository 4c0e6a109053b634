"""`mining audit`: a reviewed random sample of the selection → its leak rate with a bound
(`stage.py`: `run_draw`, `run_estimate`)."""
