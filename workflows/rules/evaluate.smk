# The proof that the set is hard (mAP: none / random N / mined N / all; ablation) and the report.
E = M["evaluate"]


rule evaluate:
    input:
        gnd=landmarks_gnd(),
        stores=expand(f"{R}/descriptors/{{method}}/{{set}}/store.json", method=METHODS, set=SETS),
        scores=f"{R}/scores/scores.parquet",
        selected=f"{R}/selected/distractors.parquet",
        decisions=decisions_path(),
    output:
        json=f"{R}/evaluation/evaluation.json",
        table=f"{R}/evaluation/evaluation.md",
    params:
        methods=lambda w, input: method_dirs(input.stores),
        scores=subpath(input.scores, parent=True),
        selected=subpath(input.selected, parent=True),
        out=subpath(output.json, parent=True),
        # select n: auto → no --n: evaluate takes the selected set's size
        n_arg="" if (E["n"] or M["select"]["n"]) == "auto" else f"--n {E['n'] or M['select']['n']}",
        seeds=" ".join(str(s) for s in E["random_seeds"]),
        setups=" ".join(E["setups"]),
    log:
        f"{LOGS}/evaluate.log",
    benchmark:
        f"{BENCH}/evaluate.tsv"
    threads: res("evaluate")["threads"]
    resources:
        mem_mb=res("evaluate")["mem_mb"],
        runtime=res("evaluate")["runtime"],
    conda:
        ENV
    shell:
        "mining evaluate --landmarks {input.gnd:q} --descriptors {params.methods:q} --scores {params.scores:q} "
        "--selected {params.selected:q} --decisions {input.decisions:q} {params.n_arg} "
        "--random-seeds {params.seeds} --setups {params.setups} --out {params.out:q} > {log:q} 2>&1"


rule report:
    input:
        evaluation=f"{R}/evaluation/evaluation.json",
        selected=f"{R}/selected/distractors.parquet",
        images=f"{R}/images/summary.json",
        candidates=f"{R}/candidates/stats.json",
        metadata=f"{R}/metadata/stats.json",
        manifest=MANIFEST_PATH,
    output:
        f"{R}/report.html",
    params:
        run=subpath(input.metadata, ancestor=2),
    log:
        f"{LOGS}/report.log",
    benchmark:
        f"{BENCH}/report.tsv"
    threads: res("report")["threads"]
    resources:
        mem_mb=res("report")["mem_mb"],
        runtime=res("report")["runtime"],
    conda:
        ENV
    shell:
        "mining report --run {params.run:q} --manifest {input.manifest:q} --out {output:q} > {log:q} 2>&1"
