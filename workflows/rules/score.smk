# Descriptors → per-candidate distractor score and the review queue.


rule score:
    input:
        gnd=landmark_gnds(),
        stores=stores_of(METHODS),
        neardup=L.neardup_table,
        candidates=L.candidates_parquet,
        cascade=cascade_inputs(),
    output:
        scores=L.scores_table,
        queue=L.review_queue,
    params:
        methods=lambda w, input: method_dirs(input.stores),
        out=subpath(output.scores, parent=True),
        landmarks=lambda w, input: landmarks_arg(input.gnd),
        manifest=MANIFEST_PATH,
        settings=settings("score", "review"),
    log:
        L.log("score"),
    benchmark:
        L.bench("score")
    threads: res("score")["threads"]
    resources:
        mem_mb=res("score")["mem_mb"],
        runtime=res("score")["runtime"],
    conda:
        ENV
    shell:
        "mining score --manifest {params.manifest:q} --landmarks {params.landmarks} --descriptors {params.methods:q} "
        "--out {params.out:q} --threads {threads} --near-duplicates {input.neardup:q} "
        "--candidates {input.candidates:q} > {log:q} 2>&1"
