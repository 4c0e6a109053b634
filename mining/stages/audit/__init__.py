"""`mining audit`: a reviewed random sample of the selection → its leak rate with a bound (`stage.py`: `draw`, `estimate`)."""
