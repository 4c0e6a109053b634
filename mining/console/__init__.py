"""What a person sees: progress bars for a terminal or a log, commands printed to paste."""
