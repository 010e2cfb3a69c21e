# Stage generate: one job per model × backend × dataset × method × seed; one engine load.
# A Maj@N' job (equal_compute in the experiment) also reads the refinement and Maj@N
# generations whose measured tokens price N'. A method whose LLM judge names another model also
# reads that model's manifest (its engine is loaded in the same job).
from retrace.stages.generate import scorer_model


def generate_inputs(w):
    job = job_of(w)
    inputs = {"problems": f"{RESULTS}/data/{w.dataset}.jsonl",
              "manifest": f"{RESULTS}/models/{w.model}/manifest.json"}
    if job.equal_compute:
        for role, label in zip(("refine", "majority"), job.equal_compute[:2]):
            inputs[role] = f"{RESULTS}/generations/{_plan.sibling(job, label).path}.jsonl"
    judge = scorer_model(job.config())
    if judge:  # an LLM judge on another model than the policy
        inputs["scorer_manifest"] = f"{RESULTS}/models/{judge}/manifest.json"
    return inputs


def scorer_args(w, input):
    return f"--scorer-manifest {input.scorer_manifest}" if "scorer_manifest" in input.keys() else ""


def equal_compute_args(w, input):
    job = job_of(w)
    if not job.equal_compute:
        return ""
    return (f"--equal-compute-from {input.refine} {input.majority} "
            f"--equal-compute-kind {job.equal_compute[2]}")


rule generate:
    input:
        unpack(generate_inputs),
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
        equal_compute=equal_compute_args,
        scorer=scorer_args,
    threads: 2
    resources:
        mem_mb=4000,
        engine=1,
    shell:
        "{PY} -m retrace generate {params.job} {params.equal_compute} {params.scorer} --data {input.problems} "
        "--manifest {input.manifest} --cache {CACHE} --out {output.rows} > {log} 2>&1"
