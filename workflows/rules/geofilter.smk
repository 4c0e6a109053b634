# Typed metadata -> the candidates: geotagged photos outside the excluded countries and areas.


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
