"""`mining leakrisk`: each candidate's risk of showing a landmark (`stage.py`)."""
