# Stage generate: one job per cell (model × backend × dataset × seed) runs every label of the
# cell that is not split into shards on one engine (retrace.stages.generate_cell; rules
# generate_cell_<i>, one per group of cells with the same labels, retrace.planning.parts): shared depth-0
# samples are generated once and the model is loaded once. A cell whose labels together need
# more attempts at the partition limit than the SLURM profile allows (less one kept for faults)
# is cut into consecutive parts, one job each, logged as seed<S>.part<k> (retrace.planning.parts, sized as
# `retrace plan` sizes them). Each label keeps its own output and provenance; a job's rerun key
# combines its labels' keys, so a changed label reruns its job, whose unchanged labels the
# request cache serves without the engine.
# A Maj@N' label (equal_compute in the experiment) runs after the refinement and Maj@N labels
# whose measured tokens price N' (in the same job, or an earlier part's: then an input). A
# label with `shards: K` runs K data-parallel shard jobs (rules generate_shard_<i>), merged by its
# cell's score job (score.smk), or by rule generate for a Maj@N' label's partner (retrace.store.shards).
# A method whose LLM judge names another model also reads that model's manifest (its engine
# is loaded in the same job). Resources (GPUs, memory, runtime) are sized per job by
# retrace.planning.cluster and retrace.planning.parts for profiles/slurm.
import re

from retrace.planning import cells as _cells
from retrace.planning import rule_groups as _rule_groups
from retrace.util.presigned import presigned
from retrace.stages.generate import scorer_model

# (cell, suffix) -> the part one job runs: its labels and their summed bound (retrace.planning.parts)
PARTS = {(p.part.cell, p.part.suffix): p for p in SIZED.parts}
MERGED = _cells.merged_labels(JOBS)  # labels rule generate merges (Maj@N' partners)


def cell_generations(g, suffix):
    path = f"{g.model}/{g.backend}/{{dataset}}/LABEL/seed{{seed}}"
    return [f"{RESULTS}/generations/{path.replace('LABEL', label)}{suffix}" for label in g.labels]


def part_key(g, w):
    return ((g.model, g.backend, w.dataset, int(w.seed)), g.suffix)


def part_inputs(g):
    """The part's data, its model (and LLM judges), and partners of its Maj@N' labels made
    elsewhere (an earlier part's generations, a sharded partner's merged ones)."""

    def inputs(w):
        part = PARTS[part_key(g, w)].part
        out = {
            "problems": f"{RESULTS}/data/{w.dataset}.jsonl",
            "manifest": f"{RESULTS}/models/{g.model}/manifest.json",
            "weights": weights(g),
        }
        labels = {j.label for j in part.labels}
        out["partners"] = [
            f"{RESULTS}/generations/{_plan.sibling(j, label).path}.jsonl"
            for j in part.labels
            for label in j.equal_compute[:2]
            if label not in labels
        ]
        out["judges"] = [f"{RESULTS}/models/{m}/manifest.json" for m in _cells.judge_models(part.labels)]
        out["hub"] = reward_hub_inputs(part.labels)  # RM@N's reward models (rule hub_artifact)
        return out

    return presigned(inputs)


def part_generate_key(g):
    return presigned(lambda w: _cells.cell_generate_key(PARTS[part_key(g, w)].part.labels))


# The model and backend of a group's cells are written into its rule's paths, not wildcards:
# Snakemake finds a file's producers by the constant prefix of the rules' outputs (up to the
# first wildcard), so each generations file is matched against its own model's groups only,
# not every group's every label (the planning cost of a paper-scale grid, issue 57). A group's
# jobs ask for the same resources, stated as constants (retrace.planning.rule_groups).
for _i, _g in enumerate(_rule_groups.part_groups(SIZED.parts, config["max_runtime"])):

    rule:
        name:
            f"generate_cell_{_i}"
        input:
            unpack(part_inputs(_g)),
        output:
            rows=cell_generations(_g, ".jsonl"),
            provs=cell_generations(_g, ".jsonl.prov.json"),
        log:
            f"{RESULTS}/logs/generate/{_g.model}/{_g.backend}/{{dataset}}/seed{{seed}}{_g.suffix}.log",
        benchmark:
            f"{RESULTS}/benchmarks/generate/{_g.model}/{_g.backend}/{{dataset}}/seed{{seed}}{_g.suffix}.tsv"
        wildcard_constraints:
            dataset="|".join(re.escape(d) for d in _g.datasets),
            seed="|".join(str(s) for s in _g.seeds),
        threads: _g.resource("threads")
        resources:
            mem_mb=_g.resource("mem_mb"),
            engine=1,
            gpu=_g.resource("gpu"),
            slurm_partition=gpu_partition(_g.resource("gpu")),
            gpu_model=gpu_model(_g.resource("gpu")),
            cpus_per_gpu=CPUS_PER_GPU,
            runtime=_g.resource("runtime"),
        params:
            key=part_generate_key(_g),
            plan=PLANNED_ARGS,
            labels=",".join(_g.labels),
            model=_g.model,
            backend=_g.backend,
        # Not an f-string: Snakemake evaluates a shell string again when the job runs, when _g is
        # the loop's last group (every cell would run the last group's model and backend).
        shell:
            "HF_HUB_OFFLINE=1 {PY} -m retrace generate-cell {params.plan} --model {params.model} "
            "--backend {params.backend} --dataset {wildcards.dataset} --seed {wildcards.seed} "
            "--labels {params.labels} --cache {CACHE} > {log} 2>&1"

    # a label split into shards in other cells (rule generate) but not in these: the cell job's
    workflow.ruleorder(f"generate_cell_{_i}", "generate")


def engine_inputs(job):
    """A shard job's data, its model (and an LLM judge's), its Maj@N' partners' generations."""
    inputs = {
        "problems": f"{RESULTS}/data/{job.dataset}.jsonl",
        "manifest": f"{RESULTS}/models/{job.model}/manifest.json",
        "weights": weights(job),
    }
    if job.equal_compute:
        for role, label in zip(("refine", "majority"), job.equal_compute[:2]):
            inputs[role] = f"{RESULTS}/generations/{_plan.sibling(job, label).path}.jsonl"
    judge = scorer_model(_plan.job_config(job))
    if judge:  # an LLM judge on another model than the policy
        inputs["scorer_manifest"] = f"{RESULTS}/models/{judge}/manifest.json"
    inputs["hub"] = reward_hub_inputs([job])  # RM@N's reward model (rule hub_artifact)
    return inputs


def merge_inputs(w):
    """The shards a Maj@N' partner's generations are merged from (an unsharded label's are made
    by its cell's job, another sharded label's by its score job: those rules come first)."""
    job = job_of(w)
    if job.shards == 1:
        raise ValueError(f"{job.path}: not sharded, made by its cell's job (rules generate_cell_<i>)")
    return {
        "problems": f"{RESULTS}/data/{w.dataset}.jsonl",
        "shards": [f"{RESULTS}/shards/{job.path}/{i}of{job.shards}.jsonl" for i in range(job.shards)],
    }


def merge_command(w, input, output):
    job = job_of(w)
    shards = " ".join(input.shards)
    return f"merge-shards {job.cli_args()} --data {input.problems} --out {output.rows} {shards}"


# Merging a sharded label's shards: a small job with no engine (constants, as above).
rule generate:
    input:
        unpack(presigned(merge_inputs)),
    output:
        rows=f"{RESULTS}/generations/{JOB_PATH}.jsonl",
        prov=f"{RESULTS}/generations/{JOB_PATH}.jsonl.prov.json",
    log:
        f"{RESULTS}/logs/generate/{JOB_PATH}.log",
    benchmark:
        f"{RESULTS}/benchmarks/generate/{JOB_PATH}.tsv"
    # only labels split into shards that a Maj@N' label reads (somewhere): the others are made
    # by their cell's job, or merged by their cell's score job (retrace.planning.plan.merged_in_score)
    wildcard_constraints:
        label="|".join(re.escape(label) for label in MERGED) or r"(?!)",
    threads: 1
    resources:
        mem_mb=2000,
        engine=0,
        gpu=0,
        cpus_per_gpu=CPUS_PER_GPU,
        runtime=30,
    params:
        key=job_key("generate"),
        # the request cache is named in the shell line, not here: pointing at another cache
        # (a shared one, outside the run) must not rerun finished jobs (issue 57)
        command=presigned(merge_command),
    shell:
        "HF_HUB_OFFLINE=1 {PY} -m retrace {params.command} --cache {CACHE} > {log} 2>&1"


def shard_path(g):
    return f"{g.model}/{g.backend}/{{dataset}}/{g.label}/seed{{seed}}"


def shard_job(g, w):
    return JOB_INDEX[(g.model, g.backend, w.dataset, g.label, w.seed)]


def shard_inputs(g):
    return presigned(lambda w: engine_inputs(shard_job(g, w)))


def shard_key(g):
    return presigned(lambda w: _plan.job_rerun_key("generate", shard_job(g, w)))


def shard_cli(g):
    return presigned(lambda w: shard_job(g, w).cli_args())


def shard_equal_compute(g):
    """A shard job's Maj@N' arguments: its partners' generations (inputs) and the kind of N'."""

    def args(w, input):
        job = shard_job(g, w)
        if not job.equal_compute:
            return ""
        return f"--equal-compute-from {input.refine} {input.majority} --equal-compute-kind {job.equal_compute[2]}"

    return presigned(args)


def scorer_args(w, input):
    return f"--scorer-manifest {input.scorer_manifest}" if "scorer_manifest" in input.keys() else ""


# One rule per sharded label's group of shard jobs, its model, backend and label in its paths
# and its resources constants, as the cell rules (retrace.planning.rule_groups).
for _i, _g in enumerate(_rule_groups.shard_groups(SIZED, config["max_runtime"])):

    rule:
        name:
            f"generate_shard_{_i}"
        input:
            unpack(shard_inputs(_g)),
        output:
            rows=f"{RESULTS}/shards/{shard_path(_g)}/{{shard}}of{{shards}}.jsonl",
            prov=f"{RESULTS}/shards/{shard_path(_g)}/{{shard}}of{{shards}}.jsonl.prov.json",
        log:
            f"{RESULTS}/logs/generate/{shard_path(_g)}.shard{{shard}}of{{shards}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/generate/{shard_path(_g)}.shard{{shard}}of{{shards}}.tsv"
        wildcard_constraints:
            dataset="|".join(re.escape(d) for d in _g.datasets),
            seed="|".join(str(s) for s in _g.seeds),
            shards=str(_g.shards),
        threads: _g.resource("threads")
        resources:
            mem_mb=_g.resource("mem_mb"),
            engine=1,
            gpu=_g.resource("gpu"),
            slurm_partition=gpu_partition(_g.resource("gpu")),
            gpu_model=gpu_model(_g.resource("gpu")),
            cpus_per_gpu=CPUS_PER_GPU,
            runtime=_g.resource("runtime"),
        # the params and shell line as they were when one rule made every shard: a change to either
        # reruns the finished jobs (Snakemake's params and code rerun triggers)
        params:
            key=shard_key(_g),
            job=shard_cli(_g),
            equal_compute=shard_equal_compute(_g),
            scorer=presigned(scorer_args),
        # Not an f-string (the cell rules say why).
        shell:
            "HF_HUB_OFFLINE=1 {PY} -m retrace generate {params.job} {params.equal_compute} {params.scorer} --shard {wildcards.shard} "
            "--shards {wildcards.shards} --data {input.problems} --manifest {input.manifest} "
            "--cache {CACHE} --out {output.rows} > {log} 2>&1"
