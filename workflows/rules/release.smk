# The selection → a publishable set: faces blurred, licences chosen, a dataset card, checksums.
REL = M.release


rule release:
    input:
        selected=L.audited_table,
        audit=L.audit_json,
        images=L.images_summary,
        candidates=L.candidates_parquet,
        candidates_stats=L.candidates_stats,
        evaluation=L.evaluation_json,
        manifest=MANIFEST_PATH,
        stores=stores_of(METHODS) if REL["kit"] else [],
    output:
        card=report(L.release_card, category="Release", caption="../report/card.rst"),
        sums=L.release_sums,
        txt=L.release_txt,
    params:
        selected=subpath(input.selected, parent=True),
        images=subpath(input.images, parent=True),
        out=subpath(output.card, parent=True),
        # manifest values reach the command line as `--key=value` words, never as words of their own
        licenses=shlex.join(f"--licenses={x}" for x in ([REL["licenses"]] if isinstance(REL["licenses"], str)
                                                          else REL["licenses"])),
        blur="" if REL["blur_faces"] else "--no-blur",
        threshold=shlex.quote(f"--threshold={REL['face_threshold']}"),
        min_face=shlex.quote(f"--min-face={REL['min_face_px']}"),
        over="--allow-over-target" if M.audit["over_target"] == "allow" else "",
        tar=shlex.join(["--tar", f"--shard-size={REL['shard_size']}"]) if REL["tar"] else "",
        # the evaluation kit: the method folders the evaluation read (one shell word each)
        kit=lambda w, input: shlex.join(["--kit", "--descriptors", *method_dirs(input.stores)]) if REL["kit"] else "",
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
        "{params.licenses} --candidates {input.candidates:q} "
        "--candidates-stats {input.candidates_stats:q} --evaluation {input.evaluation:q} "
        "--audit {input.audit:q} {params.over} "
        "--manifest {input.manifest:q} {params.blur} {params.threshold} {params.min_face} "
        "{params.tar} {params.kit} --workers {threads} > {log:q} 2>&1"
