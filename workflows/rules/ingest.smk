# YFCC100M metadata → typed Parquet → geofiltered candidates.


rule ingest:
    input:
        metadata=metadata_inputs(),
        landmarks=L.landmarks_json,  # `mining landmarks check` runs before anything else
    output:
        L.metadata_stats,
    params:
        out=subpath(output[0], parent=True),
        places=shlex.quote(f"--places={M['places']}") if M.get("places") else "",
        hashes=shlex.quote(f"--hash={M['hashes']}") if M.get("hashes") and not DEMO else "",
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


rule geofilter:
    input:
        stats=L.metadata_stats,
        manifest=MANIFEST_PATH,
    output:
        candidates=L.candidates_parquet,
        stats=L.candidates_stats,
    params:
        metadata=subpath(input.stats, parent=True),
        out=subpath(output.stats, parent=True),
    log:
        L.log("geofilter"),
    benchmark:
        L.bench("geofilter")
    threads: res("geofilter")["threads"]
    resources:
        mem_mb=res("geofilter")["mem_mb"],
        runtime=res("geofilter")["runtime"],
    conda:
        ENV
    shell:
        "mining geofilter --metadata {params.metadata:q} --manifest {input.manifest:q} --out {params.out:q} > {log:q} 2>&1"
