# YFCC100M metadata (TSV, bz2 or SQLite) → typed Parquet (mining/stages/ingest/).


rule ingest:
    input:
        metadata=metadata_inputs(),
        places=[M["places"]] if M.get("places") else [],  # files: a changed one reruns ingest
        hashes=[M["hashes"]] if M.get("hashes") and not DEMO else [],
        landmarks=L.landmarks_json,  # `mining landmarks check` runs before anything else
    output:
        L.metadata_stats,
    params:
        out=subpath(output[0], parent=True),
        places=lambda w, input: shlex.join(["--places", *input.places]) if input.places else "",
        hashes=lambda w, input: shlex.join(["--hash", *input.hashes]) if input.hashes else "",
    log:
        L.log("ingest"),
    benchmark:
        L.bench("ingest")
    threads: res("ingest")["threads"]
    resources:
        mem_mb=res("ingest")["mem_mb"],
        runtime=res("ingest")["runtime"],
    conda:
        ENV
    shell:
        "mining ingest {input.metadata:q} {params.places} {params.hashes} --workers {threads} --out {params.out:q} "
        "> {log:q} 2>&1"
