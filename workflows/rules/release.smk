# The selection → a publishable set: faces blurred, licences chosen, a dataset card, checksums.


rule release:
    input:
        selected=L.distractors_table,
        images=L.images_summary,
        candidates=L.candidates_parquet,
        candidates_stats=L.candidates_stats,
        evaluation=L.evaluation_json,
        manifest=MANIFEST_PATH,
    output:
        card=report(L.release_card, category="Release", caption="../report/card.rst"),
        sums=L.release_sums,
        txt=L.release_txt,
    params:
        selected=subpath(input.selected, parent=True),
        images=subpath(input.images, parent=True),
        out=subpath(output.card, parent=True),
        settings=settings("release"),
    log:
        L.log("release"),
    benchmark:
        L.bench("release")
    threads: res("release")["threads"]
    resources:
        mem_mb=res("release")["mem_mb"],
        runtime=res("release")["runtime"],
    conda:
        ENV
    shell:
        "mining release --selected {params.selected:q} --images {params.images:q} --out {params.out:q} "
        "--candidates {input.candidates:q} "
        "--candidates-stats {input.candidates_stats:q} --evaluation {input.evaluation:q} "
        "--manifest {input.manifest:q} --workers {threads} > {log:q} 2>&1"
