# Stage diagnose: per-depth recovery/regression, B(d) and diversity of refinement jobs.
# A small job: on a cluster it runs in the controller, not as an sbatch job of its own (profiles/slurm).
localrules:
    diagnose,


rule diagnose:
    input:
        rows=f"{RESULTS}/generations/{JOB_PATH}.jsonl",
        problems=f"{RESULTS}/data/{{dataset}}.jsonl",
    output:
        diagnostics=f"{RESULTS}/diagnostics/{JOB_PATH}.json",
        prov=f"{RESULTS}/diagnostics/{JOB_PATH}.json.prov.json",
    log:
        f"{RESULTS}/logs/diagnose/{JOB_PATH}.log",
    params:
        key=job_key("diagnose"),
        job=lambda w: job_of(w).cli_args(),
    shell:
        "{PY} -m retrace diagnose {params.job} --generations {input.rows} "
        "--data {input.problems} --out {output.diagnostics} > {log} 2>&1"
