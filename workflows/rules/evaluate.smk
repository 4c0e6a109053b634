# The proof that the set is hard (mAP: none / random N / mined N / all; ablation) and the report.


rule evaluate:
    input:
        gnd=landmark_gnds(),
        stores=stores_of(DESCRIBED),
        scores=L.scores_table,
        selected=L.distractors_table,
        decisions=decisions_path(),
        cascade=cascade_inputs(),
    output:
        json=L.evaluation_json,
        table=report(L.evaluation_md, category="Result", caption="../report/evaluation.rst"),
        summary=report(L.evaluation_summary, category="Result", caption="../report/summary.rst"),
    params:
        methods=lambda w, input: method_dirs(input.stores),
        scores=subpath(input.scores, parent=True),
        selected=subpath(input.selected, parent=True),
        out=subpath(output.json, parent=True),
        landmarks=lambda w, input: landmarks_arg(input.gnd),
        manifest=MANIFEST_PATH,
        settings=settings("evaluate", "select"),
    log:
        L.log("evaluate"),
    benchmark:
        L.bench("evaluate")
    threads: res("evaluate")["threads"]
    resources:
        mem_mb=res("evaluate")["mem_mb"],
        runtime=res("evaluate")["runtime"],
    conda:
        ENV
    shell:
        "mining evaluate --manifest {params.manifest:q} --landmarks {params.landmarks} --descriptors {params.methods:q} "
        "--scores {params.scores:q} --selected {params.selected:q} --decisions {input.decisions:q} "
        "--out {params.out:q} > {log:q} 2>&1"
