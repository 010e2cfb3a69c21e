# Stage generate: one job per model × backend × dataset × method × seed; one engine load.
rule generate:
    input:
        problems=f"{RESULTS}/data/{{dataset}}.jsonl",
        manifest=f"{RESULTS}/models/{{model}}/manifest.json",
    output:
        rows=f"{RESULTS}/generations/{JOB_PATH}.jsonl",
        prov=f"{RESULTS}/generations/{JOB_PATH}.jsonl.prov.json",
    log:
        f"{RESULTS}/logs/generate/{JOB_PATH}.log",
    benchmark:
        f"{RESULTS}/benchmarks/generate/{JOB_PATH}.tsv"
    params:
        key=job_key("generate"),
        job=lambda w: job_of(w).cli_args(),
    threads: 2
    resources:
        mem_mb=4000,
        engine=1,
    shell:
        "{PY} -m retrace generate {params.job} --data {input.problems} --manifest {input.manifest} "
        "--cache {CACHE} --out {output.rows} > {log} 2>&1"
