"""Landmark datasets and their files: gnd files read safely, datasets built and checked, benchmarks."""
