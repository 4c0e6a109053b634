# Images → descriptors, per method and image set. Methods that learn (whitening, codebooks)
# learn on candidates only; the landmark sets reuse the candidates store as their model.
# Methods that share one decode and one feature extraction per image (rsift-asmk and
# rsift-vlad: one RootSIFT; mining.methods.shared_groups says which) are described by one
# job, `describe_*_shared`, each into its usual store (same bytes as alone); the others by
# `describe_candidates` / `describe_landmarks`, one job per method.
import re as _re

from mining.methods import shared_groups as _shared_groups

DESCRIBE_GROUPS = _shared_groups(DESCRIBED, M.describe["params"])
DESCRIBE_SHARED = [g for g in DESCRIBE_GROUPS if len(g) > 1]
DESCRIBE_ALONE = "|".join(_re.escape(g[0]) for g in DESCRIBE_GROUPS if len(g) == 1) or "(?!)"  # (?!): none
# A landmark set's store: DESC/<method>/{set}, or with several benchmarks one per benchmark,
# DESC/<method>/benchmarks/{bench}/{set}, described from that benchmark's ground truth.
LM_BENCH = "{bench}" if MULTI else None
LM_TAG = "{bench}_{set}" if MULTI else "{set}"

if MULTI:

    wildcard_constraints:
        bench="|".join(_re.escape(b) for b in BENCH_NAMES),


rule describe_candidates:
    input:
        L.images_summary,
        lambda w: shortlist_input(w.method),
    output:
        L.store("{method}", "candidates"),
    wildcard_constraints:
        method=DESCRIBE_ALONE,
    params:
        images=subpath(input[0], parent=True),
        out=subpath(output[0], parent=True),
        shortlist=lambda w: shortlist_arg(w.method),
        manifest=MANIFEST_PATH,
        settings=lambda w: settings("describe", "dask", *(["cascade"] if w.method in CASCADED else [])),
    log:
        L.log("describe/{method}_candidates"),
    benchmark:
        L.bench("describe/{method}_candidates")
    threads: res("describe_candidates")["threads"]
    resources:
        mem_mb=res("describe_candidates")["mem_mb"],
        runtime=res("describe_candidates")["runtime"],
    conda:
        ENV
    shell:
        "mining describe --method {wildcards.method:q} --images {params.images:q} --set candidates "
        "--out {params.out:q} {params.shortlist} --manifest {params.manifest:q} --workers {threads} > {log:q} 2>&1"


rule describe_landmarks:
    input:
        gnd=landmark_gnd,
        model=L.store("{method}", "candidates"),
    output:
        L.store("{method}", "{set}", LM_BENCH),
    wildcard_constraints:
        method=DESCRIBE_ALONE,
        set="queries|database",
    params:
        model=subpath(input.model, parent=True),
        out=subpath(output[0], parent=True),
        manifest=MANIFEST_PATH,
        settings=settings("describe"),
    log:
        L.log(f"describe/{{method}}_{LM_TAG}"),
    benchmark:
        L.bench(f"describe/{{method}}_{LM_TAG}")
    threads: res("describe_landmarks")["threads"]
    resources:
        mem_mb=res("describe_landmarks")["mem_mb"],
        runtime=res("describe_landmarks")["runtime"],
    conda:
        ENV
    shell:
        "mining describe --method {wildcards.method:q} --images {input.gnd:q} --set {wildcards.set:q} "
        "--model {params.model:q} --out {params.out:q} --manifest {params.manifest:q} --dask-cluster=local "
        "--workers {threads} > {log:q} 2>&1"


for _i, _group in enumerate(DESCRIBE_SHARED):
    _tag = "+".join(_group)

    rule:
        name:
            f"describe_candidates_shared{_i + 1 if _i else ''}"
        input:
            L.images_summary,
            shortlist_input(_group[0]),  # a group is cascaded whole or not at all (the manifest's check)
        output:
            [L.store(m, "candidates") for m in _group],
        params:
            methods=",".join(_group),
            shortlist=shortlist_arg(_group[0]),
            images=subpath(input[0], parent=True),
            out=lambda w: f"{L.descriptors}/{{method}}/candidates",  # {method}: mining describe fills it in
            manifest=MANIFEST_PATH,
            settings=settings("describe", "dask", *(["cascade"] if _group[0] in CASCADED else [])),
        log:
            L.log(f"describe/{_tag}_candidates"),
        benchmark:
            L.bench(f"describe/{_tag}_candidates")
        threads: res("describe_candidates")["threads"]
        resources:
            mem_mb=res("describe_candidates")["mem_mb"],
            runtime=res("describe_candidates")["runtime"],
        conda:
            ENV
        shell:
            "mining describe --method {params.methods:q} --images {params.images:q} --set candidates "
            "--out {params.out:q} {params.shortlist} --manifest {params.manifest:q} --workers {threads} > {log:q} 2>&1"

    rule:
        name:
            f"describe_landmarks_shared{_i + 1 if _i else ''}"
        input:
            gnd=landmark_gnd,
            models=[L.store(m, "candidates") for m in _group],
        output:
            [L.store(m, "{set}", LM_BENCH) for m in _group],
        wildcard_constraints:
            set="queries|database",
        params:
            methods=",".join(_group),
            model=lambda w: f"{L.descriptors}/{{method}}/candidates",
            out=landmark_out,
            manifest=MANIFEST_PATH,
            settings=settings("describe"),
        log:
            L.log(f"describe/{_tag}_{LM_TAG}"),
        benchmark:
            L.bench(f"describe/{_tag}_{LM_TAG}")
        threads: res("describe_landmarks")["threads"]
        resources:
            mem_mb=res("describe_landmarks")["mem_mb"],
            runtime=res("describe_landmarks")["runtime"],
        conda:
            ENV
        shell:
            "mining describe --method {params.methods:q} --images {input.gnd:q} --set {wildcards.set:q} "
            "--model {params.model:q} --out {params.out:q} --manifest {params.manifest:q} --dask-cluster=local "
            "--workers {threads} > {log:q} 2>&1"
