"""`mining select`: scores + review decisions -> the final distractor set (`stage.py`: `run`)."""
