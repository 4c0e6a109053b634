# Candidates → verified 1024 px images (Dask fan-out; resumable per shard).
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
        host=lambda w: "{host}" if DEMO else D["host"],
        args=(
            f"--size {D['size']} --per-host-rps {D['per_host_rps']} --shard-size {D['shard_size']} "
            f"--min-size {D['min_size']} --timeout {D['timeout']} --min-ok-fraction {D['min_ok_fraction']}"
            + (" --tar" if D["tar"] else "")
        ),
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
        "{params.serve}mining download --candidates {input.candidates:q} --out {params.out:q} --host {params.host:q} "
        "{params.args} {params.dask} > {log:q} 2>&1"
