# Descriptors → per-candidate distractor score and the review queue.


rule score:
    input:
        gnd=landmarks_gnd(),
        stores=expand(L.store("{method}", "{set}"), method=METHODS, set=SETS),
        neardup=L.neardup_table,
    output:
        scores=L.scores_table,
        queue=L.review_queue,
    params:
        methods=lambda w, input: method_dirs(input.stores),
        out=subpath(output.scores, parent=True),
        top=M.score["review_top"],
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
        "mining score --landmarks {input.gnd:q} --descriptors {params.methods:q} --out {params.out:q} "
        "--review-top {params.top} --threads {threads} --near-duplicates {input.neardup:q} > {log:q} 2>&1"
