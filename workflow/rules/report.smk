# Stage report: results table, claims and diagnostics with plots; then an audit of the lineage.
REFINE_DIAGNOSTICS = cell_folders("diagnostics", method="refine")


# Small jobs: on a cluster they run in the controller, not as sbatch jobs of their own (profiles/slurm).
localrules:
    report,
    audit,


rule report:
    input:
        scores=cell_folders("scores"),
        claims=f"{RESULTS}/report/claims.csv",
        diagnostics=REFINE_DIAGNOSTICS,
        sections=EXTRA_SECTIONS,
        probes=[f"{RESULTS}/probe/{m}/{b}.json" for m, b in PROBES],
        # generations the score jobs merged from shards, which the transcripts read (the others are
        # the score jobs' inputs): asked for here, so that one deleted runs its score job again
        merged=[f"{RESULTS}/generations/{j.path}.jsonl" for j in _cells.score_merged(JOBS)],
    output:
        html=report(f"{RESULTS}/report/index.html", caption="../report/results.rst", category="Results"),
        csv=report(f"{RESULTS}/report/results.csv", caption="../report/results.rst", category="Results"),
        plot=report(
            f"{RESULTS}/report/accuracy_vs_compute.png", caption="../report/plots.rst", category="Plots"
        ),
        depth=[f"{RESULTS}/report/depth_curves.png"] if REFINE_DIAGNOSTICS else [],
    log:
        f"{RESULTS}/logs/report.log",
    params:
        key=lambda w: _plan.rerun_key("report", {}),
        sections=lambda w, input: " ".join(f"--section {s}" for s in input.sections),
        probes=lambda w, input: " ".join(f"--probe {p}" for p in input.probes),
        plan=PLANNED_ARGS,
    shell:
        "{PY} -m retrace report --out-dir {RESULTS}/report --claims {input.claims} "
        "{params.sections} {params.probes} {params.plan} > {log} 2>&1"


rule audit:
    input:
        csv=f"{RESULTS}/report/results.csv",
        html=f"{RESULTS}/report/index.html",
        claims=f"{RESULTS}/report/claims.csv",
    output:
        f"{RESULTS}/report/audit.txt",
    log:
        f"{RESULTS}/logs/audit.log",
    shell:
        "{PY} -m retrace audit {input.csv} {input.claims} {input.html} > {output} 2> {log}"
