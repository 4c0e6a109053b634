"""Each rule's threads, memory and wall time come from one file (workflows/resources.yaml)."""

from __future__ import annotations

import re

import pytest
import yaml

from mining.compute import resources
from mining.errors import UserError
from snakerun import DEMO_MANIFEST, REPO, snakemake

FILE = REPO / "workflows" / "resources.yaml"


def _workflow_rules() -> set[str]:
    names = set()
    for smk in (REPO / "workflows" / "rules").glob("*.smk"):
        names |= set(re.findall(r"^\s*rule (\w+):", smk.read_text(), re.M))
    return names


@pytest.mark.parametrize("size", ["r1m", "demo"])
def test_every_rule_has_figures_in_every_size(size):
    table = resources.load(FILE, size)
    assert _workflow_rules() <= set(table)
    for rule, res in table.items():
        assert set(res) == {"threads", "mem_mb", "runtime"}, rule


def test_the_slurm_profile_holds_no_rule_figures():
    profile = yaml.safe_load((REPO / "workflows/profiles/slurm/config.yaml").read_text())
    assert not {"set-resources", "set-threads", "default-resources", "resources"} & set(profile)


def test_the_rules_take_their_figures_from_the_file(tmp_path):
    """A dry run with the R1M figures plans describe_candidates with 32 threads and 64 GB."""
    r1m = resources.load(FILE, "r1m")["describe_candidates"]
    r = snakemake(tmp_path, "-n", "--cores", "64", "--resources", "mem_mb=100000", "--config", "resources=r1m",
                  f"manifest={DEMO_MANIFEST}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    block = r.stdout.split("rule describe_candidates:", 1)[1].split("\n\n", 1)[0]
    assert f"threads: {r1m['threads']}" in block
    assert f"mem_mb={r1m['mem_mb']}" in block and f"runtime={r1m['runtime']}" in block


def test_bad_resource_files_name_the_place(tmp_path):
    bad = tmp_path / "r.yaml"
    bad.write_text("r1m:\n  score: {threads: 0, mem_mb: 10, runtime: 5}\n")
    with pytest.raises(UserError, match=r"r1m\.score: threads must be"):
        resources.load(bad, "r1m")
    with pytest.raises(UserError, match="no resource size 'huge'"):
        resources.load(bad, "huge")
    bad.write_text("r1m:\n  score: {threads: 1, mem_mb: 10}\n")
    with pytest.raises(UserError, match="expected exactly threads, mem_mb, runtime"):
        resources.load(bad, "r1m")
