# The landmark dataset is checked before anything else runs: a broken gnd file (indices out of
# range, a missing bbx, absent images) fails here in a second, naming the query and the key,
# not hours later in describe or score. landmarks.json is the grouping found (landmark → queries).


rule landmarks_check:
    input:
        landmark_gnds(),
    output:
        L.landmarks_json,
    log:
        L.log("landmarks_check"),
    benchmark:
        L.bench("landmarks_check")
    threads: res("landmarks_check")["threads"]
    resources:
        mem_mb=res("landmarks_check")["mem_mb"],
        runtime=res("landmarks_check")["runtime"],
    conda:
        ENV
    params:
        landmarks=lambda w, input: landmarks_arg(input),
    shell:
        "mining landmarks check {params.landmarks} --json > {output:q} 2> {log:q}"
