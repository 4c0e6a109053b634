# Descriptors → per-candidate distractor score and the review queue.


rule score:
    input:
        gnd=landmark_gnds(),
        stores=stores_of(METHODS),
        neardup=L.neardup_table,
        candidates=L.candidates_parquet,
    output:
        scores=L.scores_table,
        queue=L.review_queue,
    params:
        methods=lambda w, input: method_dirs(input.stores),
        out=subpath(output.scores, parent=True),
        top=M.score["review_top"],
        budget=(f"--review-budget={M.review['budget']} --review-min={M.review['min_per_landmark']}"
                if M.review["budget"] else ""),
        landmarks=lambda w, input: landmarks_arg(input.gnd),
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
        "mining score --landmarks {params.landmarks} --descriptors {params.methods:q} --out {params.out:q} "
        "--review-top={params.top} {params.budget} --threads {threads} --near-duplicates {input.neardup:q} "
        "--candidates {input.candidates:q} > {log:q} 2>&1"
