"""`mining demo`: its build step with every stage's shape, `run_build(inputs, out, options)`
(`world.py` plans and builds the world; `BuildInputs` is empty: the world is a function of its
settings). `mining demo serve` is a server that runs until stopped (`server.serve_forever`),
the named exception to that shape, like `mining review serve`."""

from mining.stages.demo.world import BuildInputs, run_build

__all__ = ["BuildInputs", "run_build"]
