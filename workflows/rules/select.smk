# Scores + decisions → the final distractor set (top N, confirmed landmark images dropped).


rule select:
    input:
        scores=f"{R}/scores/scores.parquet",
        decisions=decisions_path(),
        candidates=f"{R}/candidates/candidates.parquet",
        gnd=landmarks_gnd(),
    output:
        txt=f"{R}/selected/distractors.txt",
        table=f"{R}/selected/distractors.parquet",
    params:
        scores=subpath(input.scores, parent=True),
        out=subpath(output.txt, parent=True),
        n=M["select"]["n"],
        unclear="--drop-unclear" if M["select"]["drop_unclear"] else "",
    log:
        f"{LOGS}/select.log",
    benchmark:
        f"{BENCH}/select.tsv"
    threads: res("select")["threads"]
    resources:
        mem_mb=res("select")["mem_mb"],
        runtime=res("select")["runtime"],
    conda:
        ENV
    shell:
        "mining select {params.scores:q} --decisions {input.decisions:q} --candidates {input.candidates:q} "
        "--landmarks {input.gnd:q} --n {params.n} {params.unclear} --out {params.out:q} > {log:q} 2>&1"
