# distractor-mining workflow: thin on purpose. Config, validation, includes, `rule all`.
# Every rule only wires files to a `mining` CLI call; all logic lives in the package.
#
#   snakemake --cores 2                                         # the demo world (manifests/demo.yaml)
#   snakemake --cores 32 --config manifest=manifests/r1m.yaml   # another recipe
#   snakemake --workflow-profile workflows/profiles/slurm --config manifest=...   # SLURM
from snakemake.utils import min_version

min_version("9.0")

from mining.settings import manifest as _manifest
from mining import stages as _stages
from mining.errors import UserError

MANIFEST_PATH = config.get("manifest", f"{workflow.basedir}/manifests/demo.yaml")
try:
    M = _manifest.load(MANIFEST_PATH, inputs=True)  # every input file readable, before anything runs
except UserError as exc:
    raise WorkflowError(str(exc)) from None

R = M.results.rstrip("/")
DEMO = "demo" in M


include: "workflows/rules/common.smk"


# Each stage's rules: workflows/rules/<stage>.smk, for every stage in mining/stages/
# (mining.stages.names(), in pipeline order; tests/unit/test_architecture.py checks the files).
for _stage in _stages.names():

    include: f"workflows/rules/{_stage}.smk"


rule all:
    input:
        final_targets(),
    default_target: True


onsuccess:
    review_gate_message()
