# Stage score: extract, judge and vote over stored rollouts (never generates).
# A small job: on a cluster it runs in the controller, not as an sbatch job of its own (profiles/slurm).
localrules:
    score,


rule score:
    input:
        rows=f"{RESULTS}/generations/{JOB_PATH}.jsonl",
        problems=f"{RESULTS}/data/{{dataset}}.jsonl",
        manifest=f"{RESULTS}/models/{{model}}/manifest.json",
    output:
        score=report(f"{RESULTS}/scores/{JOB_PATH}.json", caption="../report/scores.rst", category="Scores"),
        prov=f"{RESULTS}/scores/{JOB_PATH}.json.prov.json",
    log:
        f"{RESULTS}/logs/score/{JOB_PATH}.log",
    params:
        key=job_key("score"),
        job=lambda w: job_of(w).cli_args(),
    shell:
        "{PY} -m retrace score {params.job} --generations {input.rows} --data {input.problems} "
        "--manifest {input.manifest} --out {output.score} > {log} 2>&1"
