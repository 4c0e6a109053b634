# The selection → a publishable set: faces blurred, licences chosen, a dataset card, checksums.


rule release:
    input:
        selected=L.audited_table,
        audit=L.audit_json,
        images=L.images_summary,
        candidates=L.candidates_parquet,
        candidates_stats=L.candidates_stats,
        evaluation=L.evaluation_json,
        manifest=MANIFEST_PATH,
        stores=stores_of(DESCRIBED) if M.release["kit"] else [],
    output:
        card=report(L.release_card, category="Release", caption="../report/card.rst"),
        sums=L.release_sums,
        txt=L.release_txt,
    params:
        selected=subpath(input.selected, parent=True),
        images=subpath(input.images, parent=True),
        out=subpath(output.card, parent=True),
        settings=settings("release", "audit"),
        # the evaluation kit: the method folders the evaluation read (one shell word each)
        descriptors=lambda w, input: shlex.join(["--descriptors", *method_dirs(input.stores)]) if M.release["kit"] else "",
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
        "--audit {input.audit:q} {params.descriptors} "
        "--manifest {input.manifest:q} --workers {threads} > {log:q} 2>&1"
