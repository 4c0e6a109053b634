"""What says that a candidate shows a landmark: geometry, dates, the near-duplicate and leak-risk files."""
