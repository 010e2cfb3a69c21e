# Stage family ART (task library, tool-pausing programs): select -> run -> leakcheck -> summarize.
# Reads the experiment's `art:` block (retrace.art.plan); absent = nothing runs. An unseen
# task's selection is a checkpoint: its runs read exactly the library files it chose, and
# their rerun keys hash exactly those files (editing one demonstration reruns only the runs
# whose prompts contain it).
import os

from snakemake.exceptions import IncompleteCheckpointException

from retrace.art import plan as _art
from retrace.art import resources as _art_resources
from retrace.art import summary as _art_summary
from retrace.util.atomic import portable  # paths inside the run stay relative: a copied run is current

ART_CFG = family_config("art")
if ART_CFG:
    ART = _art.check(ART_CFG, where=f"config/experiment/{config['experiment']}.yaml: art")
    ART_JOBS = {(j.model, j.task, j.label, str(j.seed)): j for j in _art.jobs(ART)}
    ART_RUNS = [f"{RESULTS}/art/{j.path}.jsonl" for j in ART_JOBS.values()]
    ART_SUMMARY = f"{RESULTS}/art/summary"
    EXTRA_CLAIMS.append(f"{ART_SUMMARY}/claims.csv")
    EXTRA_SECTIONS.append(f"{ART_SUMMARY}/section.json")

    def art_job(w):
        return ART_JOBS[(w.model, w.task, w.label, w.seed)]

    def in_run(paths):
        """Tool data inside the run, as relative inputs. Files outside it (the word list of a
        package in the venv) are left to the rule's key, which hashes every tool data file by
        content: as inputs their paths would change with the venv's place, and a copied run
        would rerun (issue 45)."""
        return [p for p in map(portable, paths) if not os.path.isabs(p)]

    def art_version(w):
        return _art.job_version(ART, art_job(w))

    def art_selection(w):
        """The selection file of an unseen task's library-using run (a checkpoint output), else None."""
        job = art_job(w)
        if not (_art.uses_library(job) and _art.needs_selection(job.task)):
            return None
        version = _art.selection_version(ART, art_version(w))
        return checkpoints.art_select.get(model=w.model, task=w.task, version=version).output.sel

    def art_library(w):
        job = art_job(w)
        if not _art.uses_library(job):
            return []
        return [
            portable(p)
            for p in _art.library_files(ART, art_version(w), _art.selected_tasks(ART, job, art_selection(w)))
        ]

    def art_key(w):
        # A function of the wildcards only: Snakemake leaves params derived from `input` out of
        # its params rerun trigger (persistence.non_derived_params), so a key computed from
        # `input` would never rerun a job whose settings changed.
        try:
            files = art_library(w)
        except IncompleteCheckpointException:  # the selection has not run yet
            return "pending selection"
        return _art.run_key(ART, art_job(w), files)

    wildcard_constraints:
        task=r"[^/]+",
        version=r"[^/]+",

    # The bookkeeping stages are small: on a cluster they run in the controller (profiles/slurm).
    localrules:
        art_leakcheck,
        art_summarize,

    checkpoint art_select:
        input:
            problems=lambda w: f"{RESULTS}/data/{_art.dataset_of(w.task, ART)}.jsonl",
            manifest=f"{RESULTS}/models/{{model}}/manifest.json",
            weights=weights,
            library=lambda w: [portable(p) for p in _art.selection_inputs(ART, w.version)],
            tools=in_run(_art.select_tool_data(ART)),
        output:
            sel=f"{RESULTS}/art/{{model}}/{{task}}/selection/{{version}}.json",
        log:
            f"{RESULTS}/logs/art/select/{{model}}/{{task}}/{{version}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/art/{{model}}/{{task}}/selection/{{version}}.tsv"
        threads: lambda w: _art_resources.resources(ART, w.model)["threads"]
        resources:  # GPUs, memory, runtime from the model, backend and budgets (art/resources.py)
            mem_mb=lambda w: _art_resources.resources(ART, w.model)["mem_mb"],
            gpu=lambda w: _art_resources.resources(ART, w.model)["gpu"],
            slurm_partition=gpu_partition(lambda w: _art_resources.resources(ART, w.model)["gpu"]),
            gpu_model=gpu_model(lambda w: _art_resources.resources(ART, w.model)["gpu"]),
            cpus_per_gpu=CPUS_PER_GPU,
            runtime=lambda w: capped(_art_resources.resources(ART, w.model)["runtime"]),
            engine=1,
        params:
            key=lambda w: _art.select_key(ART, w.task, w.version),
        shell:
            "{PY} -m retrace art select --experiment {config[experiment]} --model {wildcards.model} "
            "--task {wildcards.task} --version {wildcards.version} --data {input.problems} "
            "--manifest {input.manifest} --cache {CACHE} --out {output.sel} > {log} 2>&1"

    rule art_run:
        input:
            problems=lambda w: f"{RESULTS}/data/{_art.dataset_of(w.task, ART)}.jsonl",
            manifest=f"{RESULTS}/models/{{model}}/manifest.json",
            weights=weights,
            selection=lambda w: art_selection(w) or [],
            library=art_library,
            # the search collection, the word list, the code template: editing one reruns
            # the jobs that construct the tools
            tools=lambda w: in_run(_art.tool_data(ART)) if _art.uses_tools(art_job(w)) else [],
        output:
            rows=f"{RESULTS}/art/{{model}}/{{task}}/{{label}}/seed{{seed}}.jsonl",
            prov=f"{RESULTS}/art/{{model}}/{{task}}/{{label}}/seed{{seed}}.jsonl.prov.json",
        log:
            f"{RESULTS}/logs/art/run/{{model}}/{{task}}/{{label}}/seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/art/{{model}}/{{task}}/{{label}}/seed{{seed}}.tsv"
        threads: lambda w: _art_resources.resources(ART, w.model, w.label)["threads"]
        resources:  # GPUs, memory, runtime from the model, backend and budgets (art/resources.py)
            mem_mb=lambda w: _art_resources.resources(ART, w.model, w.label)["mem_mb"],
            gpu=lambda w: _art_resources.resources(ART, w.model, w.label)["gpu"],
            slurm_partition=gpu_partition(lambda w: _art_resources.resources(ART, w.model, w.label)["gpu"]),
            gpu_model=gpu_model(lambda w: _art_resources.resources(ART, w.model, w.label)["gpu"]),
            cpus_per_gpu=CPUS_PER_GPU,
            runtime=lambda w: capped(_art_resources.resources(ART, w.model, w.label)["runtime"]),
            engine=1,
        params:
            key=art_key,
            selection=lambda w, input: f"--selection {input.selection}" if input.selection else "",
        shell:
            "{PY} -m retrace art run --experiment {config[experiment]} --model {wildcards.model} "
            "--task {wildcards.task} --label {wildcards.label} --seed {wildcards.seed} "
            "--data {input.problems} --manifest {input.manifest} --cache {CACHE} {params.selection} "
            "--out {output.rows} > {log} 2>&1"

    rule art_leakcheck:
        input:
            runs=ART_RUNS,
            problems=sorted(
                {
                    f"{RESULTS}/data/{_art.dataset_of(t, ART)}.jsonl"
                    for t in ART["tasks"].get("library", []) + ART["tasks"].get("unseen", [])
                }
            ),
            # demonstrations of every version, the main version's index.yaml, eval_tasks.yaml
            library=[portable(p) for p in _art.leakcheck_inputs(ART)],
        output:
            leak=f"{ART_SUMMARY}/leakcheck.json",
        log:
            f"{RESULTS}/logs/art/leakcheck.log",
        params:
            key=lambda w: _art.leakcheck_key(ART),
        shell:
            "{PY} -m retrace art leakcheck --experiment {config[experiment]} --data-dir {RESULTS}/data "
            "--out {output.leak} {input.runs} > {log} 2>&1"

    rule art_summarize:
        input:
            runs=ART_RUNS,
            leak=f"{ART_SUMMARY}/leakcheck.json",
        output:
            scores=f"{ART_SUMMARY}/scores.json",
            claims=f"{ART_SUMMARY}/claims.csv",
            section=f"{ART_SUMMARY}/section.json",
        log:
            f"{RESULTS}/logs/art/summarize.log",
        params:
            key=lambda w: _art_summary.summary_key(ART),
        shell:
            "{PY} -m retrace art summarize --experiment {config[experiment]} --data-dir {RESULTS}/data "
            "--out-dir {ART_SUMMARY} --leak {input.leak} {input.runs} > {log} 2>&1"
