# Candidates → verified 1024 px images (Dask fan-out; resumable per shard), from the manifest's
# sources tried in order (download.sources, or the one flickr source of download.host).
D = M.download


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
        serve=(lambda w, input: f"mining demo serve {shlex.quote(str(Path(input.world).parent))} --port {M['demo']['port']} -- ")
        if DEMO
        else "",
        # a function: a plain string would have its braces read as wildcards
        sources=lambda w: DOWNLOAD_SOURCES,
        args=shlex.join(
            f"--{k.replace('_', '-')}={D[k]}"
            for k in ("size", "per_host_rps", "threads", "shard_size", "min_size", "timeout", "connect_timeout",
                      "retries", "max_throttle_wait", "min_ok_fraction")
        )
        + (" --tar" if D["tar"] else ""),
        dask=lambda w, threads: dask_args(threads),
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
        "--sources-json {params.sources:q} {params.args} {params.dask} > {log:q} 2>&1"
