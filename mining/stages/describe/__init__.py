"""`mining describe`: an image set -> a descriptor store per method (`stage.py`: `describe_many`)."""
