# Review queue → decisions. With a real manifest a person reviews in the app and exports the
# decisions (the run stops here until they exist); the demo uses simulated reviewers that
# answer from the world's truth through the same HTTP API.


rule review_import:
    input:
        L.review_queue,
    output:
        L.review_db,
    log:
        L.log("review_import"),
    benchmark:
        L.bench("review_import")
    threads: res("review_import")["threads"]
    resources:
        mem_mb=res("review_import")["mem_mb"],
        runtime=res("review_import")["runtime"],
    conda:
        ENV
    shell:
        "mining review import {input:q} --db {output:q} > {log:q} 2>&1"


if M.review["mode"] == "simulate":

    rule review_simulate:
        input:
            db=L.review_db,
            truth=L.world_truth,
        output:
            decisions_path(),
        params:
            manifest=MANIFEST_PATH,
            settings=settings("review", "demo"),
        log:
            L.log("review_simulate"),
        benchmark:
            L.bench("review_simulate")
        threads: res("review_simulate")["threads"]
        resources:
            mem_mb=res("review_simulate")["mem_mb"],
            runtime=res("review_simulate")["runtime"],
        conda:
            ENV
        shell:
            SIMULATE_SHELL
