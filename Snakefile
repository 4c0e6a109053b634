# distractor-mining workflow: thin on purpose. Config, validation, includes, `rule all`.
# Every rule only wires files to a `mining` CLI call; all logic lives in the package.
#
#   snakemake --cores 2                                         # the demo world (manifests/demo.yaml)
#   snakemake --cores 32 --config manifest=manifests/r1m.yaml   # another recipe
#   snakemake --workflow-profile workflows/profiles/slurm --config manifest=...   # SLURM
from snakemake.utils import min_version

min_version("9.0")

from mining import manifest as _manifest
from mining.errors import UserError

MANIFEST_PATH = config.get("manifest", f"{workflow.basedir}/manifests/demo.yaml")
try:
    M = _manifest.load(MANIFEST_PATH, inputs=True)  # every input file readable, before anything runs
except UserError as exc:
    raise WorkflowError(str(exc)) from None

R = M.results.rstrip("/")
DEMO = "demo" in M


include: "workflows/rules/common.smk"
include: "workflows/rules/demo.smk"
include: "workflows/rules/landmarks.smk"
include: "workflows/rules/ingest.smk"
include: "workflows/rules/download.smk"
include: "workflows/rules/describe.smk"
include: "workflows/rules/neardup.smk"
include: "workflows/rules/score.smk"
include: "workflows/rules/review.smk"
include: "workflows/rules/select.smk"
include: "workflows/rules/audit.smk"
include: "workflows/rules/evaluate.smk"
include: "workflows/rules/release.smk"


rule all:
    input:
        final_targets(),
    default_target: True


onsuccess:
    review_gate_message()
