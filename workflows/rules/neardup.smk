# Near-duplicate groups among candidates and near-copies of landmark images (dHash + the global
# descriptor's cosine, mining/stages/neardup/stage.py). Score puts each landmark's probable landmark images at
# the top of its review queue; select drops unreviewed ones and keeps one image per group.


rule neardup:
    input:
        images=L.images_summary,
        gnd=landmark_gnds(),
        stores=stores_of([NEARDUP_METHOD]),
    output:
        table=L.neardup_table,
        stats=L.neardup_stats,
    params:
        images=subpath(input.images, parent=True),
        desc=lambda w, input: method_dirs(input.stores)[0],
        out=subpath(output.table, parent=True),
        landmarks=lambda w, input: landmarks_arg(input.gnd),
        manifest=MANIFEST_PATH,
        settings=settings("neardup"),
    log:
        L.log("neardup"),
    benchmark:
        L.bench("neardup")
    threads: res("neardup")["threads"]
    resources:
        mem_mb=res("neardup")["mem_mb"],
        runtime=res("neardup")["runtime"],
    conda:
        ENV
    shell:
        "mining neardup --manifest {params.manifest:q} --images {params.images:q} --landmarks {params.landmarks} --descriptors {params.desc:q} "
        "--out {params.out:q} --threads {threads} > {log:q} 2>&1"
