"""`mining demo`: its build step, `run_build(out=..., options=...)` (`world.py` plans and builds
the world, a function of its settings alone). `mining demo serve` is a server that runs until
stopped (`server.serve_forever`), like `mining review serve`."""

from mining.stages.demo.world import run_build

__all__ = ["run_build"]
