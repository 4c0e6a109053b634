# YFCC100M metadata → typed Parquet → geofiltered candidates.


rule ingest:
    input:
        metadata=metadata_inputs(),
        landmarks=f"{R}/landmarks/landmarks.json",  # `mining landmarks check` runs before anything else
    output:
        f"{R}/metadata/stats.json",
    params:
        out=subpath(output[0], parent=True),
        places=f"--places {shlex.quote(M['places'])}" if M.get("places") else "",
    log:
        f"{LOGS}/ingest.log",
    benchmark:
        f"{BENCH}/ingest.tsv"
    threads: res("ingest")["threads"]
    resources:
        mem_mb=res("ingest")["mem_mb"],
        runtime=res("ingest")["runtime"],
    conda:
        ENV
    shell:
        "mining ingest {input.metadata:q} {params.places} --out {params.out:q} > {log:q} 2>&1"


rule geofilter:
    input:
        stats=f"{R}/metadata/stats.json",
        manifest=MANIFEST_PATH,
    output:
        candidates=f"{R}/candidates/candidates.parquet",
        stats=f"{R}/candidates/stats.json",
    params:
        metadata=subpath(input.stats, parent=True),
        out=subpath(output.stats, parent=True),
    log:
        f"{LOGS}/geofilter.log",
    benchmark:
        f"{BENCH}/geofilter.tsv"
    threads: res("geofilter")["threads"]
    resources:
        mem_mb=res("geofilter")["mem_mb"],
        runtime=res("geofilter")["runtime"],
    conda:
        ENV
    shell:
        "mining geofilter {params.metadata:q} --manifest {input.manifest:q} --out {params.out:q} > {log:q} 2>&1"
