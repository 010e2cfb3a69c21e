# Stage generate: one job per model × backend × dataset × method × seed; one engine load.
# A Maj@N' job (equal_compute in the experiment) also reads the refinement and Maj@N
# generations whose measured tokens price N'. A run with `shards: K` runs K data-parallel
# shard jobs (rule generate_shard) and this rule only merges them (retrace.shards).
# A method whose LLM judge names another model also reads that model's manifest (its engine
# is loaded in the same job). Resources (GPUs, memory, runtime) are sized per job by
# retrace.cluster for profiles/slurm.
from retrace.stages.generate import scorer_model


def engine_inputs(w):
    job = job_of(w)
    inputs = {
        "problems": f"{RESULTS}/data/{w.dataset}.jsonl",
        "manifest": f"{RESULTS}/models/{w.model}/manifest.json",
        "weights": weights(w),
    }
    if job.equal_compute:
        for role, label in zip(("refine", "majority"), job.equal_compute[:2]):
            inputs[role] = f"{RESULTS}/generations/{_plan.sibling(job, label).path}.jsonl"
    judge = scorer_model(_plan.job_config(job))
    if judge:  # an LLM judge on another model than the policy
        inputs["scorer_manifest"] = f"{RESULTS}/models/{judge}/manifest.json"
    return inputs


def generate_inputs(w):
    job = job_of(w)
    if job.shards == 1:
        return engine_inputs(w)
    return {
        "problems": f"{RESULTS}/data/{w.dataset}.jsonl",
        "shards": [f"{RESULTS}/shards/{job.path}/{i}of{job.shards}.jsonl" for i in range(job.shards)],
    }


def scorer_args(w, input):
    return f"--scorer-manifest {input.scorer_manifest}" if "scorer_manifest" in input.keys() else ""


def equal_compute_args(w, input):
    job = job_of(w)
    if not job.equal_compute:
        return ""
    return (
        f"--equal-compute-from {input.refine} {input.majority} "
        f"--equal-compute-kind {job.equal_compute[2]}"
    )


def generate_command(w, input, output):
    job = job_of(w)
    if job.shards > 1:
        return f"merge-shards {job.cli_args()} --data {input.problems} --out {output.rows} " + " ".join(
            input.shards
        )
    return (
        f"generate {job.cli_args()} {equal_compute_args(w, input)} {scorer_args(w, input)} "
        f"--data {input.problems} "
        f"--manifest {input.manifest} --cache {CACHE} --out {output.rows}"
    )


def engine_threads(w):
    """The engine's CPU threads (llama.cpp's n_threads; 2 otherwise); merging shards takes 1."""
    job = job_of(w)
    if job.shards > 1 and not hasattr(w, "shard"):
        return 1
    from retrace.cluster import threads

    return threads(_plan.job_config(job))


def engine_resource(name, merge_value=0):
    """A resource of the job's engine (retrace.cluster); a merge of shards needs none."""
    return lambda w: (
        merge_value if job_of(w).shards > 1 and not hasattr(w, "shard") else job_resources(w)[name]
    )


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
    threads: engine_threads
    resources:
        mem_mb=engine_resource("mem_mb", 2000),
        engine=engine_resource("engine"),
        gpu=engine_resource("gpu"),
        slurm_partition=gpu_partition(engine_resource("gpu")),
        cpus_per_gpu=CPUS_PER_GPU,
        runtime=engine_resource("runtime", 30),
    params:
        key=job_key("generate"),
        command=generate_command,
    shell:
        "{PY} -m retrace {params.command} > {log} 2>&1"


rule generate_shard:
    input:
        unpack(engine_inputs),
    output:
        rows=f"{RESULTS}/shards/{JOB_PATH}/{{shard}}of{{shards}}.jsonl",
        prov=f"{RESULTS}/shards/{JOB_PATH}/{{shard}}of{{shards}}.jsonl.prov.json",
    log:
        f"{RESULTS}/logs/generate/{JOB_PATH}.shard{{shard}}of{{shards}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/generate/{JOB_PATH}.shard{{shard}}of{{shards}}.tsv"
    threads: engine_threads
    resources:
        mem_mb=engine_resource("mem_mb"),
        engine=1,
        gpu=engine_resource("gpu"),
        slurm_partition=gpu_partition(engine_resource("gpu")),
        cpus_per_gpu=CPUS_PER_GPU,
        runtime=engine_resource("runtime"),
    params:
        key=job_key("generate"),
        job=lambda w: job_of(w).cli_args(),
        equal_compute=equal_compute_args,
        scorer=scorer_args,
    shell:
        "{PY} -m retrace generate {params.job} {params.equal_compute} {params.scorer} --shard {wildcards.shard} "
        "--shards {wildcards.shards} --data {input.problems} --manifest {input.manifest} "
        "--cache {CACHE} --out {output.rows} > {log} 2>&1"
