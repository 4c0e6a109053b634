"""The workflow through the README's SLURM command, and what the controller recorded of it
(shared by the SLURM workflow tests)."""

from __future__ import annotations

import re
from pathlib import Path

from slurmcluster import PARTITION, Cluster
from snakerun import REPO, failure_text, snakemake

# The README's SLURM command, with the test cluster's partition given on the command line,
# threads capped to this 2-core machine, and the plugin's first status check after 2 s
# instead of 40 (the jobs here take seconds, not hours).
SLURM_ARGS = [
    "--workflow-profile", str(REPO / "workflows" / "profiles" / "slurm"),
    "--default-resources", f"slurm_partition={PARTITION}",
    "--max-threads", "2",
    "--slurm-init-seconds-before-status-checks", "2",
]


def job_rules(cluster: Cluster, before: set[str]) -> list[tuple[str, str]]:
    """(rule with wildcards, final state) of every workflow job in the controller's record
    that was not there before (`before`: job ids)."""
    return sorted((j["comment"].removeprefix("rule_"), j["state"]) for j in cluster.jobs()
                  if j["comment"].startswith("rule_") and j["id"] not in before)


def expected_jobs(workdir: Path, manifest: Path, *targets: str) -> dict[str, int]:
    """Jobs per rule that the workflow plans for a fresh run (a dry run's job stats, `all` left
    out), or for a run `--until` the rules `targets`."""
    r = snakemake(workdir, "-n", "--cores", "2", *(["--until", *targets] if targets else []), manifest=manifest)
    assert r.returncode == 0, failure_text(r)
    table = r.stdout.split("Job stats:", 1)[1].split("Reasons:", 1)[0]
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}
    counts.pop("all", None)
    counts.pop("total", None)
    return counts


def completed_per_rule(jobs: list[tuple[str, str]]) -> dict[str, int]:
    """COMPLETED jobs per rule (wildcards dropped)."""
    done: dict[str, int] = {}
    for name, state in jobs:
        if state == "COMPLETED":
            rule = name.split("_wildcards_")[0]
            done[rule] = done.get(rule, 0) + 1
    return done
