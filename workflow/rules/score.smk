# Stage score: extract, judge and vote over stored rollouts (never generates), and per-depth
# diagnostics of the refinement jobs. One job per model × backend × dataset × seed scores all
# of its labels (retrace.stages.score_cell): scoring takes seconds, and one job per label was
# most of the jobs of a paper-scale plan. Each label still gets its own score (and diagnostics)
# file with its own provenance record. Cells with the same labels share a rule
# (retrace.planning.plan.score_groups), whose wildcard values are exactly those cells.
SCORE_CELLS = {}
for _j in JOBS:
    SCORE_CELLS.setdefault((_j.model, _j.backend, _j.dataset, str(_j.seed)), []).append(_j)
SCORE_CELLS = {k: tuple(v) for k, v in SCORE_CELLS.items()}
CELL_PATH = "{model}/{backend}/{dataset}/{label}/seed{seed}"


def cell_key(w):
    return _plan.cell_rerun_key(SCORE_CELLS[(w.model, w.backend, w.dataset, w.seed)])


def cell_files(kind, labels, suffix):
    return [f"{RESULTS}/{kind}/{CELL_PATH.replace('{label}', label)}{suffix}" for label in labels]


for _i, _g in enumerate(_plan.score_groups(JOBS)):

    rule:
        name:
            f"score_{_i}"
        input:
            rows=cell_files("generations", _g.labels, ".jsonl"),
            problems=f"{RESULTS}/data/{{dataset}}.jsonl",
            manifest=f"{RESULTS}/models/{{model}}/manifest.json",
        output:
            scores=[
                report(f, caption="../report/scores.rst", category="Scores")
                for f in cell_files("scores", _g.labels, ".json")
            ],
            provs=cell_files("scores", _g.labels, ".json.prov.json"),
            diagnostics=cell_files("diagnostics", _g.diagnosed, ".json"),
            diagnostics_provs=cell_files("diagnostics", _g.diagnosed, ".json.prov.json"),
        log:
            f"{RESULTS}/logs/score/{{model}}/{{backend}}/{{dataset}}/seed{{seed}}.log",
        wildcard_constraints:
            model=re.escape(_g.model),
            backend=re.escape(_g.backend),
            dataset="|".join(re.escape(d) for d in _g.datasets),
            seed="|".join(str(s) for s in _g.seeds),
        # A small job: on a cluster it runs in the controller, not as an sbatch job (profiles/slurm).
        localrule: True
        params:
            key=cell_key,
            plan=PLANNED_ARGS,
        shell:
            "{PY} -m retrace score-cell {params.plan} --model {wildcards.model} --backend {wildcards.backend} "
            "--dataset {wildcards.dataset} --seed {wildcards.seed} > {log} 2>&1"
