# Descriptors → per-candidate distractor score and the review queue.


rule score:
    input:
        gnd=landmarks_gnd(),
        stores=expand(f"{R}/descriptors/{{method}}/{{set}}/store.json", method=METHODS, set=SETS),
        neardup=f"{R}/neardup/neardup.parquet",
    output:
        scores=f"{R}/scores/scores.parquet",
        queue=f"{R}/scores/review_queue.parquet",
    params:
        methods=lambda w, input: method_dirs(input.stores),
        out=subpath(output.scores, parent=True),
        top=M["score"]["review_top"],
    log:
        f"{LOGS}/score.log",
    benchmark:
        f"{BENCH}/score.tsv"
    threads: res("score")["threads"]
    resources:
        mem_mb=res("score")["mem_mb"],
        runtime=res("score")["runtime"],
    conda:
        ENV
    shell:
        "mining score --landmarks {input.gnd:q} --descriptors {params.methods:q} --out {params.out:q} "
        "--review-top {params.top} --threads {threads} --near-duplicates {input.neardup:q} > {log:q} 2>&1"
