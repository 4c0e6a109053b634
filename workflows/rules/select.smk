# Scores + decisions → the final distractor set (top N, confirmed landmark images dropped).


rule select:
    input:
        scores=L.scores_table,
        decisions=decisions_path(),
        candidates=L.candidates_parquet,
        gnd=landmark_gnds(),
        # n: auto measures the mined mAP-vs-N curve with every method
        stores=stores_of(METHODS)
        if M.select["n"] == "auto"
        else [],
        neardup=L.neardup_table,
        leakrisk=L.leakrisk_table,
        images=L.images_summary,
    output:
        txt=L.distractors_txt,
        table=L.distractors_table,
        stats=report(L.selected_stats, category="Selection", caption="../report/selection.rst"),
    params:
        scores=subpath(input.scores, parent=True),
        out=subpath(output.txt, parent=True),
        n=shlex.quote(f"--n={M.select['n']}"),
        auto=lambda w, input: select_auto_args(input.stores) if M.select["n"] == "auto" else "",
        unclear="--drop-unclear" if M.select["drop_unclear"] else "",
        near_duplicates=shlex.quote(f"--near-duplicates-policy={M.select['near_duplicates']}"),
        risk="--allow-unreviewed-risk" if M.select["leak_risk"] == "allow" else "",
        images=subpath(input.images, parent=True),
        full_res="--require-full-res" if M.select["require_full_res"] else "",
        landmarks=lambda w, input: landmarks_arg(input.gnd),
    log:
        L.log("select"),
    benchmark:
        L.bench("select")
    threads: res("select")["threads"]
    resources:
        mem_mb=res("select")["mem_mb"],
        runtime=res("select")["runtime"],
    conda:
        ENV
    shell:
        "mining select --scores {params.scores:q} --decisions {input.decisions:q} --candidates {input.candidates:q} "
        "--landmarks {params.landmarks} {params.n} {params.auto} {params.unclear} --near-duplicates {input.neardup:q} "
        "{params.near_duplicates} --leak-risk {input.leakrisk:q} {params.risk} "
        "--images-root {params.images:q} {params.full_res} "
        "--out {params.out:q} > {log:q} 2>&1"
