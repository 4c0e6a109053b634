"""`mining landmarks check` validates a landmark dataset and `mining landmarks build` makes one
(`stage.py`, over the shared `mining.datasets.datasetcheck` and `mining.datasets.landmarkbuild`)."""
