# The embedded demo world (only when the manifest has a `demo` section).
if DEMO:

    rule demo_world:
        output:
            metadata=L.world_metadata,
            gnd=landmark_gnds(),  # one per city (demo: {benchmarks: K})
            truth=L.world_truth,
            world=L.world_json,
        params:
            out=subpath(output.world, parent=True),
            manifest=MANIFEST_PATH,
            settings=settings("demo"),
        log:
            L.log("demo_world"),
        benchmark:
            L.bench("demo_world")
        threads: res("demo_world")["threads"]
        resources:
            mem_mb=res("demo_world")["mem_mb"],
            runtime=res("demo_world")["runtime"],
        conda:
            ENV
        shell:
            "mining demo build --manifest {params.manifest:q} --workers {threads} --out {params.out:q} > {log:q} 2>&1"
