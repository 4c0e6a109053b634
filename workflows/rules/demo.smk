# The embedded demo world (only when the manifest has a `demo` section).
if DEMO:

    rule demo_world:
        output:
            metadata=f"{WORLD}/metadata/yfcc100m_dataset",
            gnd=f"{WORLD}/landmarks/gnd_demo.pkl",
            truth=f"{WORLD}/truth.parquet",
            world=f"{WORLD}/world.json",
        params:
            out=subpath(output.world, parent=True),
            preset=M["demo"]["preset"],
            seed=M["demo"]["seed"],
        log:
            f"{LOGS}/demo_world.log",
        benchmark:
            f"{BENCH}/demo_world.tsv"
        threads: res("demo_world")["threads"]
        resources:
            mem_mb=res("demo_world")["mem_mb"],
            runtime=res("demo_world")["runtime"],
        conda:
            ENV
        shell:
            "mining demo build --preset {params.preset} --seed {params.seed} --workers {threads} --out {params.out:q} > {log:q} 2>&1"
