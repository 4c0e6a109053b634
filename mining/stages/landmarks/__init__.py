"""`mining landmarks check`: validates a landmark dataset (the shared `mining.landmarks` reads it)."""
