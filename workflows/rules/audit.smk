# The selection's measured leak rate (mining/stages/audit/stage.py): a seeded, rank-stratified random sample of
# the selection is reviewed in a queue of its own; its answers give the share of landmark images
# with a one-sided upper bound (AUDIT/audit.json) and the set less what was found, which release
# publishes. With a real manifest a person reviews the sample (the run stops until its decisions
# exist); the demo's simulated reviewers answer from the world's truth.


rule audit_draw:
    input:
        L.distractors_table,
    output:
        queue=L.audit_queue,
        plan=L.audit_plan,
    params:
        out=subpath(output.plan, parent=True),
        manifest=MANIFEST_PATH,
        settings=settings("audit"),
    log:
        L.log("audit_draw"),
    benchmark:
        L.bench("audit_draw")
    threads: res("audit_draw")["threads"]
    resources:
        mem_mb=res("audit_draw")["mem_mb"],
        runtime=res("audit_draw")["runtime"],
    conda:
        ENV
    shell:
        "mining audit draw --selected {input:q} --manifest {params.manifest:q} --out {params.out:q} > {log:q} 2>&1"


rule audit_import:
    input:
        L.audit_queue,
    output:
        L.audit_db,
    log:
        L.log("audit_import"),
    benchmark:
        L.bench("audit_import")
    threads: res("audit_import")["threads"]
    resources:
        mem_mb=res("audit_import")["mem_mb"],
        runtime=res("audit_import")["runtime"],
    conda:
        ENV
    shell:
        "mining review import {input:q} --db {output:q} > {log:q} 2>&1"


if M.review["mode"] == "simulate":

    rule audit_simulate:
        input:
            db=L.audit_db,
            truth=L.world_truth,
        output:
            L.audit_decisions,
        params:
            manifest=MANIFEST_PATH,
            settings=settings("review", "demo"),
        log:
            L.log("audit_simulate"),
        benchmark:
            L.bench("audit_simulate")
        threads: res("audit_simulate")["threads"]
        resources:
            mem_mb=res("audit_simulate")["mem_mb"],
            runtime=res("audit_simulate")["runtime"],
        conda:
            ENV
        shell:
            SIMULATE_SHELL


rule audit:
    input:
        selected=L.distractors_table,
        plan=L.audit_plan,
        decisions=L.audit_decisions,
        neardup=L.neardup_table,
    output:
        json=L.audit_json,
        table=L.audited_table,
    params:
        audit=subpath(input.plan, parent=True),
        out=subpath(output.json, parent=True),
    log:
        L.log("audit"),
    benchmark:
        L.bench("audit")
    threads: res("audit")["threads"]
    resources:
        mem_mb=res("audit")["mem_mb"],
        runtime=res("audit")["runtime"],
    conda:
        ENV
    shell:
        "mining audit estimate --selected {input.selected:q} --decisions {input.decisions:q} "
        "--audit {params.audit:q} --near-duplicates {input.neardup:q} --out {params.out:q} > {log:q} 2>&1"
