"""`mining neardup`: near-duplicate groups and near-copies of landmark images (`stage.py`)."""
