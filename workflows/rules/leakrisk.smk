# Each candidate's risk of showing a landmark (best cosine to its queries and positives,
# mining/stages/leakrisk/stage.py); select leaves out high-risk candidates beyond the reviewed depth.
rule leakrisk:
    input:
        gnd=landmark_gnds(),
        stores=stores_of([NEARDUP_METHOD]),
        geometry=stores_of(GEOMETRY_METHODS[:1]),
        queue=L.review_queue,
        candidates=L.candidates_parquet,
    output:
        table=L.leakrisk_table,
        stats=L.leakrisk_stats,
    params:
        desc=lambda w, input: method_dirs(input.stores)[0],
        geometry=lambda w, input: shlex.join(["--geometry", *method_dirs(input.geometry)]) if input.geometry else "",
        scores=subpath(input.queue, parent=True),
        out=subpath(output.table, parent=True),
        landmarks=lambda w, input: landmarks_arg(input.gnd),
    log:
        L.log("leakrisk"),
    benchmark:
        L.bench("leakrisk")
    threads: res("leakrisk")["threads"]
    resources:
        mem_mb=res("leakrisk")["mem_mb"],
        runtime=res("leakrisk")["runtime"],
    conda:
        ENV
    shell:
        "mining leakrisk --landmarks {params.landmarks} --descriptors {params.desc:q} --scores {params.scores:q} "
        "--candidates {input.candidates:q} {params.geometry} --out {params.out:q} > {log:q} 2>&1"
