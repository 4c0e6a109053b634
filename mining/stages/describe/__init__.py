"""`mining describe`: an image set -> a descriptor store per method (`stage.py`: `run`)."""
