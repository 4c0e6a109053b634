# Images → descriptors, per method and image set. Methods that learn (whitening, codebooks)
# learn on candidates only; the landmark sets reuse the candidates store as their model.


rule describe_candidates:
    input:
        f"{R}/images/summary.json",
    output:
        f"{R}/descriptors/{{method}}/candidates/store.json",
    params:
        images=subpath(input[0], parent=True),
        out=subpath(output[0], parent=True),
        dask=dask_args(),
        shard=M["describe"]["shard_size"],
    log:
        f"{LOGS}/describe/{{method}}_candidates.log",
    benchmark:
        f"{BENCH}/describe/{{method}}_candidates.tsv"
    threads: res("describe_candidates")["threads"]
    resources:
        mem_mb=res("describe_candidates")["mem_mb"],
        runtime=res("describe_candidates")["runtime"],
    conda:
        ENV
    shell:
        "mining describe --method {wildcards.method:q} --images {params.images:q} --set candidates "
        "--out {params.out:q} --workers {threads} --shard-size {params.shard} {params.dask} > {log:q} 2>&1"


rule describe_landmarks:
    input:
        gnd=landmarks_gnd(),
        model=f"{R}/descriptors/{{method}}/candidates/store.json",
    output:
        f"{R}/descriptors/{{method}}/{{set}}/store.json",
    wildcard_constraints:
        set="queries|database",
    params:
        model=subpath(input.model, parent=True),
        out=subpath(output[0], parent=True),
        shard=M["describe"]["shard_size"],
    log:
        f"{LOGS}/describe/{{method}}_{{set}}.log",
    benchmark:
        f"{BENCH}/describe/{{method}}_{{set}}.tsv"
    threads: res("describe_landmarks")["threads"]
    resources:
        mem_mb=res("describe_landmarks")["mem_mb"],
        runtime=res("describe_landmarks")["runtime"],
    conda:
        ENV
    shell:
        "mining describe --method {wildcards.method:q} --images {input.gnd:q} --set {wildcards.set:q} "
        "--model {params.model:q} --out {params.out:q} --workers {threads} --shard-size {params.shard} > {log:q} 2>&1"
