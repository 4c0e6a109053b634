# Paths and small helpers shared by the rules (no stage logic here).
import shlex
import sys
from pathlib import Path

# Rules call the `mining` installed beside the Python that runs Snakemake, so that
# `.venv/bin/snakemake` works without activating the virtualenv (also on cluster nodes).
shell.prefix(f'export PATH={shlex.quote(str(Path(sys.executable).parent))}:"$PATH"; ')

# Every stage's paths under the results folder: mining.settings.layout.RunLayout, the one place they
# are written (the report reads the same layout).
from mining.settings.layout import RunLayout

L = RunLayout(R)
ENV = "../envs/mining.yaml"
METHODS = M.methods  # they mine: scored, they choose the set
# evaluate: held_out: described like the others, evaluated, never scored (docs/protocols.md)
DESCRIBED = M.described
# cascade: methods described only on the shortlist that the cheaper methods (SHORTLIST_BY) make
# (docs/cascade.md); their stores are checked (cascade_check) before score and evaluate read them
CASCADED = M.cascaded
SHORTLIST_BY = M.shortlisted_by
# The global descriptor the near-duplicate criterion uses: cnn-gem when the run has it.
NEARDUP_METHOD = next(m for m in ["cnn-gem", *METHODS] if m in METHODS and m not in CASCADED)
# The methods that keep keypoints (`spatial_verification` in their describe params): the first
# one's stores give leakrisk its geometric evidence (mining/evidence/geometry.py).
GEOMETRY_METHODS = [m for m in METHODS if (M.describe["params"].get(m) or {}).get("spatial_verification")]
SETS = ["queries", "database", "candidates"]

# Threads, memory and wall time of every rule: workflows/resources.yaml, one size of it
# (`r1m`, or `demo` for demo manifests; `--config resources=NAME` picks another).
from mining.compute import resources as _resources

try:
    RESOURCES = _resources.load(
        f"{workflow.basedir}/workflows/resources.yaml", config.get("resources", "demo" if DEMO else "r1m")
    )
except UserError as exc:
    raise WorkflowError(str(exc)) from None


def res(rule):
    return _resources.of(RESOURCES, rule)


# The benchmarks the run mines for (manifest `landmarks:`; mining.datasets.benchmarks): one,
# or several (R1M: ROxford and RParis), whose queries and database each get their own stores
# (L.store(method, set, benchmark)) while the candidates are described once.
from mining.datasets.benchmarks import demo_names as _demo_names

BENCHMARKS = M.benchmarks([(c, L.world_city_gnd(c)) for c in _demo_names(M.demo["benchmarks"])] if DEMO else ())
MULTI = len(BENCHMARKS) > 1
BENCH_NAMES = [b.name for b in BENCHMARKS]
GND_OF = {b.name: b.gnd for b in BENCHMARKS}


def landmarks_gnd():
    """The landmark ground truth (a run with one benchmark): the demo world's, or the manifest's file."""
    return BENCHMARKS[0].gnd


def landmark_gnds():
    """Every benchmark's ground truth, in manifest order."""
    return [b.gnd for b in BENCHMARKS]


def landmarks_arg(gnds):
    """`--landmarks` of the stages that read the ground truth, from the rule's input files
    (landmark_gnds(), in order): the file, or NAME=GND for each benchmark."""
    gnds = list(gnds)
    if not MULTI:
        return shlex.quote(gnds[0])
    return " ".join(shlex.quote(f"{b.name}={g}") for b, g in zip(BENCHMARKS, gnds, strict=True))


def landmark_gnd(wildcards):
    """The ground truth whose queries or database a describe job describes."""
    return GND_OF[wildcards.bench] if MULTI else landmarks_gnd()


def landmark_out(wildcards):
    """DESC/{method}/... of a shared describe job's landmark set (mining describe fills in {method})."""
    return L.store("{method}", wildcards.set, wildcards.bench if MULTI else None).rsplit("/", 1)[0]


def stores_of(methods):
    """Every descriptor store of these methods: candidates, and each benchmark's queries and database."""
    if not MULTI:
        return expand(L.store("{method}", "{set}"), method=methods, set=SETS)
    return [L.store(m, "candidates") for m in methods] + [
        L.store(m, s, b) for m in methods for b in BENCH_NAMES for s in ("queries", "database")
    ]


def cascade_inputs():
    """What score and evaluate wait for with a cascade: its check, passed (nothing without one)."""
    return [L.cascade_check] if CASCADED else []


def shortlist_input(method):
    """A candidates describe job's shortlist: the cascade's for a cascaded method, else none."""
    return [L.shortlist] if method in CASCADED else []


def shortlist_arg(method):
    """`--shortlist FILE` of a candidates describe job (nothing for a method described in full), quoted."""
    return shlex.join(["--shortlist", L.shortlist]) if method in CASCADED else ""


def metadata_inputs():
    return [L.world_metadata] if DEMO else M["metadata"]


def settings(*sections):
    """Every stage reads its settings from the manifest itself (`--manifest`, mining.settings.options);
    a rule's `settings=settings(...)` param is only its rerun trigger (a changed setting reruns it)."""
    return {s: M.get(s) for s in sections}


def decisions_path():
    return M.review["decisions"] or L.decisions


# The demo's simulated reviewers answer a queue's database from the world's truth, then export it
# (the review and the audit: rules review_simulate and audit_simulate).
SIMULATE_SHELL = (
    "(mining review simulate --db {input.db:q} --truth {input.truth:q} "
    "--manifest {params.manifest:q} && "
    "mining review export --db {input.db:q} --out {output:q}) > {log:q} 2>&1"
)


def review_ready():
    """Human review gates the rest of the run until the exported decisions exist."""
    return M.review["mode"] == "simulate" or Path(decisions_path()).exists()


def audit_ready():
    """The audit's review (of a sample of the selection) gates the release the same way."""
    return M.review["mode"] == "simulate" or Path(L.audit_decisions).exists()


def final_targets():
    if not review_ready():
        return [L.review_queue, L.review_db]
    if not audit_ready():
        return [L.evaluation_json, L.distractors_txt, L.audit_queue, L.audit_db]
    return [L.report, L.evaluation_json, L.distractors_txt, L.audit_json, L.release_sums]


def review_gate_message():
    """After a run that stopped for the human review (or the audit's): how to review and continue
    (said only when the queue is there; mining.stages.review.gate words it)."""
    from mining.stages.review.gate import AUDIT, next_steps

    landmarks = [f"{b.name}={b.gnd}" for b in BENCHMARKS] if MULTI else landmarks_gnd()
    message = None
    if not review_ready():
        message = next_steps(L.review_queue, L.review_db, L.images, landmarks, decisions_path())
    elif not audit_ready():
        message = next_steps(L.audit_queue, L.audit_db, L.images, landmarks, L.audit_decisions, AUDIT)
    if message:
        print(message)


def method_dirs(stores):
    """DESC/<method> folders from their store.json files (one per method; a list for `:q`): the
    candidates stores' grandparents (a benchmark's stores sit deeper, in DESC/<method>/benchmarks/)."""
    return sorted({str(Path(s).parent.parent) for s in stores if Path(s).parent.name == "candidates"})


def download_sources() -> str:
    """The download's sources as JSON for --sources-json (one shell word via :q; manifest values
    are hostile). On the demo world every networked source is its server: `{host}`, which
    `mining demo serve ... --` replaces with the server's address."""
    import json

    from mining.stages.download.sources import section_entries

    entries = section_entries(M.download, str(M.path))
    if DEMO:
        entries = [e if e["kind"] == "local" else {**e, "host": "{host}"} for e in entries]
    return json.dumps(entries, sort_keys=True)


# computed when the workflow is parsed: a manifest whose sources contradict its host fails before any job
DOWNLOAD_SOURCES = download_sources()


def descriptors_arg(stores):
    """`--descriptors DESC/<method> ...` of these stores (nothing for none), quoted."""
    dirs = method_dirs(stores)
    return shlex.join(["--descriptors", *dirs]) if dirs else ""
