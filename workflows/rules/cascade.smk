# The cascade (manifest `cascade:`, docs/cascade.md): the cheaper methods' rankings make a
# shortlist, the expensive methods are described on it only (describe.smk's `--shortlist`),
# then a random check sample off the shortlist measures what it missed; score and evaluate wait
# for that check to pass. Without a cascade these rules are never needed.


rule cascade_shortlist:
    input:
        gnd=landmark_gnds(),
        stores=stores_of(SHORTLIST_BY),
    output:
        shortlist=L.shortlist,
        stats=L.shortlist_stats,
    params:
        methods=lambda w, input: method_dirs(input.stores),
        out=subpath(output.shortlist, parent=True),
        landmarks=lambda w, input: landmarks_arg(input.gnd),
        manifest=MANIFEST_PATH,
        settings=settings("cascade"),
    log:
        L.log("cascade_shortlist"),
    benchmark:
        L.bench("cascade_shortlist")
    threads: res("cascade_shortlist")["threads"]
    resources:
        mem_mb=res("cascade_shortlist")["mem_mb"],
        runtime=res("cascade_shortlist")["runtime"],
    conda:
        ENV
    shell:
        "mining cascade shortlist --manifest {params.manifest:q} --landmarks {params.landmarks} "
        "--descriptors {params.methods:q} --out {params.out:q} --no-progress > {log:q} 2>&1"


rule cascade_check:
    input:
        gnd=landmark_gnds(),
        stores=stores_of(CASCADED),
        shortlist=L.shortlist,
    output:
        L.cascade_check,
    params:
        methods=lambda w, input: method_dirs(input.stores),
        out=subpath(output[0], parent=True),
        landmarks=lambda w, input: landmarks_arg(input.gnd),
        manifest=MANIFEST_PATH,
        settings=settings("cascade"),
    log:
        L.log("cascade_check"),
    benchmark:
        L.bench("cascade_check")
    threads: res("cascade_check")["threads"]
    resources:
        mem_mb=res("cascade_check")["mem_mb"],
        runtime=res("cascade_check")["runtime"],
    conda:
        ENV
    shell:
        "mining cascade check --manifest {params.manifest:q} --landmarks {params.landmarks} "
        "--descriptors {params.methods:q} --shortlist {input.shortlist:q} --out {params.out:q} > {log:q} 2>&1"
