# Stage family DRR (issue 4): questions -> distil (Algorithm 1) -> split -> train DMs ;
# generate (rejection paths, Abstain, Self-Critic) -> infer (episodes per method) ;
# leak check ; summarise (claims + report section). Logic: src/retrace/drr/.
# Runs only when the experiment file has a `drr:` block (merged over config/drr/defaults.yaml).
_DRR_BLOCK = family_config("drr")

if _DRR_BLOCK:
    from retrace.drr import settings as _drr
    from retrace.drr.episodes import DM_METHODS as _DRR_DM_METHODS

    DRR_EXP = config["experiment"]
    DRR = _drr.load(_DRR_BLOCK, f"config/experiment/{DRR_EXP}.yaml: drr")
    DRR_ENTRIES = _drr.entries(DRR)
    DRR_TRAIN = {e["name"]: e["train"] for e in DRR_ENTRIES}
    DRR_DIR = f"{RESULTS}/drr"
    DRR_VARIANT_OF = {m: v for m, v in _DRR_DM_METHODS.items() if v in DRR["variants"]}
    DRR_METHODS = _drr.methods(DRR)  # what the report shows
    DRR_INFER_METHODS = [m for m in DRR_METHODS if m != "sft_lora"]  # made by drr_infer
    DRR_RUNS = [(m, DRR["backend"], s) for m in DRR["models"] for s in DRR["seeds"]]
    DRR_RUN = "{model}/{backend}"

    wildcard_constraints:
        variant="weighted|unweighted|shuffled",
        drr_method="|".join(DRR_INFER_METHODS),

    def drr_key(stage):
        return lambda w: _drr.stage_key(stage, DRR)

    def drr_files(pattern, datasets=True):
        out = []
        for m, b, s in DRR_RUNS:
            for e in (DRR_ENTRIES if datasets else [{"name": ""}]):
                out.append(pattern.format(model=m, backend=b, seed=s, dataset=e["name"]))
        return out

    def reasoner_gpus(w):
        return _drr.reasoner_resources(DRR, w.model)["gpu"]

    def infer_gpus(w):  # the DM's, for the variants that run it; the others read generations only
        return _drr.dm_resources(DRR, training=False)["gpu"] if w.drr_method in DRR_VARIANT_OF else 0

    # The bookkeeping stages are small: on a cluster they run in the controller (profiles/slurm).
    localrules:
        drr_questions,
        drr_split,
        drr_leakcheck,
        drr_summarise,

    rule drr_questions:
        input:
            data=f"{RESULTS}/data/{{dataset}}.jsonl",
            train=lambda w: (
                [f"{RESULTS}/data/{DRR_TRAIN[w.dataset]}.jsonl"] if DRR_TRAIN.get(w.dataset) else []
            ),
        output:
            train=f"{DRR_DIR}/questions/{{dataset}}/train.jsonl",
            eval=f"{DRR_DIR}/questions/{{dataset}}/eval.jsonl",
        log:
            f"{RESULTS}/logs/drr/questions/{{dataset}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/drr/questions/{{dataset}}.tsv"
        params:
            key=drr_key("questions"),
            train=lambda w, input: f"--train-data {input.train[0]}" if input.train else "",
        shell:
            "{PY} -m retrace drr questions --experiment {DRR_EXP} --dataset {wildcards.dataset} "
            "--data {input.data} {params.train} --out-train {output.train} --out-eval {output.eval} > {log} 2>&1"

    rule drr_distil:
        input:
            problems=f"{DRR_DIR}/questions/{{dataset}}/train.jsonl",
            manifest=f"{RESULTS}/models/{{model}}/manifest.json",
            weights=weights,
        output:
            traces=f"{DRR_DIR}/{DRR_RUN}/distil/{{dataset}}/seed{{seed}}/traces.jsonl",
            prompts=f"{DRR_DIR}/{DRR_RUN}/distil/{{dataset}}/seed{{seed}}/prompts.jsonl",
        log:
            f"{RESULTS}/logs/drr/{DRR_RUN}/distil/{{dataset}}/seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/drr/{DRR_RUN}/distil/{{dataset}}/seed{{seed}}.tsv"
        threads: lambda w: _drr.reasoner_resources(DRR, w.model)["threads"]
        resources:
            mem_mb=lambda w: _drr.reasoner_resources(DRR, w.model)["mem_mb"],
            gpu=reasoner_gpus,
            slurm_partition=gpu_partition(reasoner_gpus),
            gpu_model=gpu_model(reasoner_gpus),
            cpus_per_gpu=CPUS_PER_GPU,
            engine=1,
            runtime=lambda w: capped(_drr.reasoner_runtime(DRR, w.model, "distil", w.dataset, MIRROR)),
        params:
            key=drr_key("distil"),
        shell:
            "{PY} -m retrace drr distil --experiment {DRR_EXP} --dataset {wildcards.dataset} "
            "--problems {input.problems} --manifest {input.manifest} --backend {wildcards.backend} "
            "--seed {wildcards.seed} --cache {CACHE} --out-traces {output.traces} "
            "--out-prompts {output.prompts} > {log} 2>&1"

    rule drr_split:
        input:
            traces=lambda w: [
                f"{DRR_DIR}/{w.model}/{w.backend}/distil/{e['name']}/seed{w.seed}/traces.jsonl"
                for e in DRR_ENTRIES
            ],
        output:
            train=f"{DRR_DIR}/{DRR_RUN}/dm/seed{{seed}}/split/train.jsonl",
            dev=f"{DRR_DIR}/{DRR_RUN}/dm/seed{{seed}}/split/dev.jsonl",
            shuffled=f"{DRR_DIR}/{DRR_RUN}/dm/seed{{seed}}/split/train_shuffled.jsonl",
            summary=f"{DRR_DIR}/{DRR_RUN}/dm/seed{{seed}}/split/split.json",
        log:
            f"{RESULTS}/logs/drr/{DRR_RUN}/split/seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/drr/{DRR_RUN}/split/seed{{seed}}.tsv"
        params:
            key=drr_key("split"),
        shell:
            "{PY} -m retrace drr split --experiment {DRR_EXP} --seed {wildcards.seed} "
            "--out-dir $(dirname {output.train}) {input.traces} > {log} 2>&1"

    DRR_HUB = hub_inputs(_drr.hub_artifacts(DRR))  # the DM's backbone, SFT-LoRA's base (rule hub_artifact)

    rule drr_train:
        input:
            hub=DRR_HUB,
            train=f"{DRR_DIR}/{DRR_RUN}/dm/seed{{seed}}/split/train.jsonl",
            dev=f"{DRR_DIR}/{DRR_RUN}/dm/seed{{seed}}/split/dev.jsonl",
            shuffled=f"{DRR_DIR}/{DRR_RUN}/dm/seed{{seed}}/split/train_shuffled.jsonl",
        output:
            manifest=f"{DRR_DIR}/{DRR_RUN}/dm/seed{{seed}}/{{variant}}/checkpoint.json",
            folder=directory(f"{DRR_DIR}/{DRR_RUN}/dm/seed{{seed}}/{{variant}}/checkpoint"),
            metrics=f"{DRR_DIR}/{DRR_RUN}/dm/seed{{seed}}/{{variant}}/train.json",
        log:
            f"{RESULTS}/logs/drr/{DRR_RUN}/train/seed{{seed}}/{{variant}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/drr/{DRR_RUN}/train/seed{{seed}}/{{variant}}.tsv"
        threads: DRR["dm"]["threads"]
        resources:  # the DM's device and size (drr/settings.dm_resources); gpu only with dm.device: cuda
            mem_mb=_drr.dm_resources(DRR)["mem_mb"],
            gpu=_drr.dm_resources(DRR)["gpu"],
            slurm_partition=gpu_partition(_drr.dm_resources(DRR)["gpu"]),
            gpu_model=gpu_model(_drr.dm_resources(DRR)["gpu"]),
            cpus_per_gpu=CPUS_PER_GPU,
            runtime=capped(DRR["runtime"]["train"]),
        params:
            key=drr_key("train"),
            # the DM's starting weights by content, not by path: new weights rerun it, and a
            # copied run (its venv elsewhere or linked back) stays finished
            start=_drr.backbone_digest(DRR),
        shell:
            "HF_HUB_OFFLINE=1 {PY} -m retrace drr train --experiment {DRR_EXP} --variant {wildcards.variant} "
            "--split-dir $(dirname {input.train}) --seed {wildcards.seed} --out {output.manifest} "
            "--ckpt-dir {output.folder} --metrics-out {output.metrics} > {log} 2>&1"

    rule drr_generate:
        input:
            problems=f"{DRR_DIR}/questions/{{dataset}}/eval.jsonl",
            manifest=f"{RESULTS}/models/{{model}}/manifest.json",
            weights=weights,
        output:
            rows=f"{DRR_DIR}/{DRR_RUN}/eval/{{dataset}}/seed{{seed}}/generations.jsonl",
            prompts=f"{DRR_DIR}/{DRR_RUN}/eval/{{dataset}}/seed{{seed}}/prompts.jsonl",
        log:
            f"{RESULTS}/logs/drr/{DRR_RUN}/generate/{{dataset}}/seed{{seed}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/drr/{DRR_RUN}/generate/{{dataset}}/seed{{seed}}.tsv"
        threads: lambda w: _drr.reasoner_resources(DRR, w.model)["threads"]
        resources:
            mem_mb=lambda w: _drr.reasoner_resources(DRR, w.model)["mem_mb"],
            gpu=reasoner_gpus,
            slurm_partition=gpu_partition(reasoner_gpus),
            gpu_model=gpu_model(reasoner_gpus),
            cpus_per_gpu=CPUS_PER_GPU,
            engine=1,
            runtime=lambda w: capped(_drr.reasoner_runtime(DRR, w.model, "generate", w.dataset, MIRROR)),
        params:
            key=drr_key("generate"),
        shell:
            "{PY} -m retrace drr generate --experiment {DRR_EXP} --problems {input.problems} "
            "--manifest {input.manifest} --backend {wildcards.backend} --seed {wildcards.seed} "
            "--cache {CACHE} --out {output.rows} --out-prompts {output.prompts} > {log} 2>&1"

    def drr_infer_inputs(w):
        inputs = {
            "rows": f"{DRR_DIR}/{w.model}/{w.backend}/eval/{w.dataset}/seed{w.seed}/generations.jsonl",
            "problems": f"{DRR_DIR}/questions/{w.dataset}/eval.jsonl",
        }
        if w.drr_method in DRR_VARIANT_OF:
            inputs["checkpoint"] = (
                f"{DRR_DIR}/{w.model}/{w.backend}/dm/seed{w.seed}/"
                f"{DRR_VARIANT_OF[w.drr_method]}/checkpoint.json"
            )
        return inputs

    rule drr_infer:
        input:
            unpack(drr_infer_inputs),
        output:
            f"{DRR_DIR}/{DRR_RUN}/eval/{{dataset}}/seed{{seed}}/episodes/{{drr_method}}.jsonl",
        log:
            f"{RESULTS}/logs/drr/{DRR_RUN}/infer/{{dataset}}/seed{{seed}}/{{drr_method}}.log",
        benchmark:
            f"{RESULTS}/benchmarks/drr/{DRR_RUN}/infer/{{dataset}}/seed{{seed}}/{{drr_method}}.tsv"
        threads: 1
        resources:
            mem_mb=lambda w: (
                _drr.dm_resources(DRR, training=False)["mem_mb"] if w.drr_method in DRR_VARIANT_OF else 2000
            ),
            gpu=infer_gpus,
            slurm_partition=gpu_partition(infer_gpus),
            gpu_model=gpu_model(infer_gpus),
            cpus_per_gpu=CPUS_PER_GPU,
            runtime=capped(DRR["runtime"]["infer"]),
        params:
            key=drr_key("infer"),
            checkpoint=lambda w, input: (
                f"--checkpoint {input.checkpoint}" if "checkpoint" in input.keys() else ""
            ),
        shell:
            "{PY} -m retrace drr infer --experiment {DRR_EXP} --method {wildcards.drr_method} "
            "--generations {input.rows} --problems {input.problems} {params.checkpoint} "
            "--out {output} > {log} 2>&1"

    if DRR["sft_lora"]["enabled"]:

        rule drr_sft:  # SFT-LoRA baseline: one LoRA on every DRR-train question, episodes per dataset
            input:
                hub=DRR_HUB,
                train=[f"{DRR_DIR}/questions/{e['name']}/train.jsonl" for e in DRR_ENTRIES],
                eval=[f"{DRR_DIR}/questions/{e['name']}/eval.jsonl" for e in DRR_ENTRIES],
            output:
                [
                    f"{DRR_DIR}/{DRR_RUN}/eval/{e['name']}/seed{{seed}}/episodes/sft_lora.jsonl"
                    for e in DRR_ENTRIES
                ],
            log:
                f"{RESULTS}/logs/drr/{DRR_RUN}/sft/seed{{seed}}.log",
            benchmark:
                f"{RESULTS}/benchmarks/drr/{DRR_RUN}/sft/seed{{seed}}.tsv"
            threads: DRR["dm"]["threads"]
            resources:
                mem_mb=lambda w: _drr.reasoner_resources(DRR, w.model)["mem_mb"],
                gpu=int(DRR["sft_lora"]["device"] == "cuda"),
                slurm_partition=gpu_partition(int(DRR["sft_lora"]["device"] == "cuda")),
                gpu_model=gpu_model(int(DRR["sft_lora"]["device"] == "cuda")),
                cpus_per_gpu=CPUS_PER_GPU,
                runtime=capped(DRR["runtime"]["sft"]),
            params:
                key=drr_key("sft"),
            shell:
                "HF_HUB_OFFLINE=1 {PY} -m retrace drr sft --experiment {DRR_EXP} --seed {wildcards.seed} "
                "--train {input.train} --eval {input.eval} --out {output} > {log} 2>&1"

    DRR_QUESTIONS = [
        f"{DRR_DIR}/questions/{e['name']}/{part}.jsonl" for e in DRR_ENTRIES for part in ("train", "eval")
    ]
    DRR_SPLITS = [
        f
        for part in ("train", "dev", "train_shuffled")
        for f in drr_files(f"{DRR_DIR}/{{model}}/{{backend}}/dm/seed{{seed}}/split/{part}.jsonl", False)
    ]
    DRR_PROMPTS = drr_files(
        f"{DRR_DIR}/{{model}}/{{backend}}/distil/{{dataset}}/seed{{seed}}/prompts.jsonl"
    ) + drr_files(f"{DRR_DIR}/{{model}}/{{backend}}/eval/{{dataset}}/seed{{seed}}/prompts.jsonl")

    rule drr_leakcheck:
        input:
            questions=DRR_QUESTIONS,
            scan=DRR_PROMPTS + DRR_SPLITS,
        output:
            f"{DRR_DIR}/leakcheck.json",
        log:
            f"{RESULTS}/logs/drr/leakcheck.log",
        benchmark:
            f"{RESULTS}/benchmarks/drr/leakcheck.tsv"
        params:
            key=drr_key("leakcheck"),
        shell:
            "{PY} -m retrace drr leakcheck --experiment {DRR_EXP} --problems {input.questions} "
            "--scan {input.scan} --out {output} > {log} 2>&1"

    DRR_EPISODES = [
        f
        for meth in DRR_METHODS
        for f in drr_files(
            f"{DRR_DIR}/{{model}}/{{backend}}/eval/{{dataset}}/seed{{seed}}/episodes/{meth}.jsonl"
        )
    ]
    DRR_TRAIN_METRICS = [
        f
        for v in DRR["variants"]
        for f in drr_files(f"{DRR_DIR}/{{model}}/{{backend}}/dm/seed{{seed}}/{v}/train.json", False)
    ]

    rule drr_summarise:
        input:
            episodes=DRR_EPISODES,
            train=DRR_TRAIN_METRICS,
            questions=DRR_QUESTIONS,
            leak=f"{DRR_DIR}/leakcheck.json",
        output:
            claims=f"{DRR_DIR}/claims.csv",
            section=f"{DRR_DIR}/section.json",
            plot=f"{DRR_DIR}/loss_curve.png",
        log:
            f"{RESULTS}/logs/drr/summarise.log",
        benchmark:
            f"{RESULTS}/benchmarks/drr/summarise.tsv"
        params:
            key=drr_key("summarise"),
        shell:
            "{PY} -m retrace drr summarise --experiment {DRR_EXP} --episodes {input.episodes} "
            "--train-metrics {input.train} --questions {input.questions} --leak {input.leak} "
            "--claims-out {output.claims} --section-out {output.section} --plot-out {output.plot} > {log} 2>&1"

    EXTRA_CLAIMS.append(f"{DRR_DIR}/claims.csv")
    EXTRA_SECTIONS.append(f"{DRR_DIR}/section.json")
