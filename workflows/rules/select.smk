# Scores + decisions → the final distractor set (top N, confirmed landmark images dropped).


rule select:
    input:
        scores=L.scores_table,
        decisions=decisions_path(),
        candidates=L.candidates_parquet,
        gnd=landmark_gnds(),
        # n: auto measures the mined mAP-vs-N curve with every method
        stores=stores_of(METHODS)
        if M.select["n"] == "auto"
        else [],
        neardup=L.neardup_table,
        leakrisk=L.leakrisk_table,
        images=L.images_summary,
    output:
        txt=L.distractors_txt,
        table=L.distractors_table,
        stats=report(L.selected_stats, category="Selection", caption="../report/selection.rst"),
    params:
        scores=subpath(input.scores, parent=True),
        out=subpath(output.txt, parent=True),
        descriptors=lambda w, input: descriptors_arg(input.stores),
        images=subpath(input.images, parent=True),
        landmarks=lambda w, input: landmarks_arg(input.gnd),
        manifest=MANIFEST_PATH,
        settings=settings("select", "evaluate"),
    log:
        L.log("select"),
    benchmark:
        L.bench("select")
    threads: res("select")["threads"]
    resources:
        mem_mb=res("select")["mem_mb"],
        runtime=res("select")["runtime"],
    conda:
        ENV
    shell:
        "mining select --manifest {params.manifest:q} --scores {params.scores:q} --decisions {input.decisions:q} "
        "--candidates {input.candidates:q} --landmarks {params.landmarks} {params.descriptors} "
        "--near-duplicates {input.neardup:q} --leak-risk {input.leakrisk:q} --images-root {params.images:q} "
        "--out {params.out:q} > {log:q} 2>&1"
