# The selection → a publishable set: faces blurred, licences chosen, a dataset card, checksums.
REL = M["release"]


rule release:
    input:
        selected=f"{R}/selected/distractors.parquet",
        images=f"{R}/images/summary.json",
        candidates=f"{R}/candidates/candidates.parquet",
        candidates_stats=f"{R}/candidates/stats.json",
        evaluation=f"{R}/evaluation/evaluation.json",
        manifest=MANIFEST_PATH,
    output:
        card=f"{R}/release/README.md",
        sums=f"{R}/release/SHA256SUMS",
        txt=f"{R}/release/distractors.txt",
    params:
        selected=subpath(input.selected, parent=True),
        images=subpath(input.images, parent=True),
        out=subpath(output.card, parent=True),
        licenses=[REL["licenses"]] if isinstance(REL["licenses"], str) else REL["licenses"],
        blur="" if REL["blur_faces"] else "--no-blur",
        threshold=REL["face_threshold"],
        min_face=REL["min_face_px"],
        tar=f"--tar --shard-size {REL['shard_size']}" if REL["tar"] else "",
    log:
        f"{LOGS}/release.log",
    benchmark:
        f"{BENCH}/release.tsv"
    threads: res("release")["threads"]
    resources:
        mem_mb=res("release")["mem_mb"],
        runtime=res("release")["runtime"],
    conda:
        ENV
    shell:
        "mining release {params.selected:q} --images {params.images:q} --out {params.out:q} "
        "--licenses {params.licenses:q} --candidates {input.candidates:q} "
        "--candidates-stats {input.candidates_stats:q} --evaluation {input.evaluation:q} "
        "--manifest {input.manifest:q} {params.blur} --threshold {params.threshold} --min-face {params.min_face} "
        "{params.tar} --workers {threads} > {log:q} 2>&1"
