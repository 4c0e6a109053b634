# Candidates → verified 1024 px images (Dask fan-out; resumable per shard), from the manifest's
# sources tried in order (download.sources, or the one flickr source of download.host).

rule download:
    input:
        candidates=L.candidates_parquet,
        world=L.world_json if DEMO else [],
    output:
        L.images_summary,
    params:
        out=subpath(output[0], parent=True),
        # On the demo world, its Flickr-like server runs for the duration of the download
        # and `{host}` becomes its address.
        serve=(lambda w, input: f"mining demo serve {shlex.quote(str(Path(input.world).parent))} "
               f"--manifest {shlex.quote(MANIFEST_PATH)} -- ")
        if DEMO
        else "",
        # a function: a plain string would have its braces read as wildcards
        sources=lambda w: DOWNLOAD_SOURCES,
        manifest=MANIFEST_PATH,
        settings=settings("download", "dask", "demo"),
    log:
        L.log("download"),
    benchmark:
        L.bench("download")
    threads: res("download")["threads"]
    resources:
        mem_mb=res("download")["mem_mb"],
        runtime=res("download")["runtime"],
    conda:
        ENV
    shell:
        "{params.serve}mining download --candidates {input.candidates:q} --out {params.out:q} "
        "--sources-json {params.sources:q} --manifest {params.manifest:q} --workers {threads} > {log:q} 2>&1"
