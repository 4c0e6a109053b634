# The run's report: one HTML page (mining/stages/report/).


rule report:
    input:
        evaluation=L.evaluation_json,
        selected=L.distractors_table,
        audit=L.audit_json,
        images=L.images_summary,
        candidates=L.candidates_stats,
        metadata=L.metadata_stats,
        manifest=MANIFEST_PATH,
    output:
        report(L.report, category="Result", caption="../report/report.rst"),
    params:
        run=subpath(input.metadata, ancestor=2),
    log:
        L.log("report"),
    benchmark:
        L.bench("report")
    threads: res("report")["threads"]
    resources:
        mem_mb=res("report")["mem_mb"],
        runtime=res("report")["runtime"],
    conda:
        ENV
    shell:
        "mining report --run {params.run:q} --manifest {input.manifest:q} --out {output:q} > {log:q} 2>&1"
