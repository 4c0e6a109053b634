"""`mining release`: the selection -> a publishable set (`stage.py`: `run`; `card.py` the dataset card)."""
