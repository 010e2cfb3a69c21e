# Stage score: extract, judge and vote over stored rollouts (never generates), and per-depth
# diagnostics of the refinement jobs. One job per model × backend × dataset × seed scores all
# of its labels (retrace.stages.score_cell): scoring takes seconds, and one job per label was
# most of the jobs of a paper-scale plan. Each label still gets its own score (and diagnostics)
# file with its own provenance record, in the cell's folder (scores/<model>/<backend>/<dataset>/
# seed<S>/<label>.json), which is what the rule declares: one output per cell, not two per
# label, since every declared file costs the planner (issue 57). Cells with the same labels
# share a rule (retrace.planning.plan.score_groups), whose wildcard values are exactly those cells.
# A sharded label's shards are merged into its generations file by its cell's score job, not a
# job of its own (but for a Maj@N' partner: rule generate; retrace.planning.plan.merged_in_score).
SCORE_CELLS = {}
for _j in JOBS:
    SCORE_CELLS.setdefault((_j.model, _j.backend, _j.dataset, str(_j.seed)), []).append(_j)
SCORE_CELLS = {k: tuple(v) for k, v in SCORE_CELLS.items()}


def cell_key(g):
    return presigned(lambda w: _plan.cell_rerun_key(SCORE_CELLS[(g.model, g.backend, w.dataset, w.seed)]))


def generations(g, suffix, merged):
    """The cell's generations files (generate.smk's cell_generations) of the labels its score job
    merges (merged=True) or of those other jobs make (the cell's jobs, rule generate)."""
    mine = {label for label, _ in g.merged}
    return [f for f, label in zip(cell_generations(g, suffix), g.labels) if (label in mine) == merged]


def merged_shards(g):
    """The shard files of the labels whose shards the score job merges (plan.merged_in_score)."""
    path = f"{RESULTS}/shards/{g.model}/{g.backend}/{{dataset}}"
    return [f"{path}/{label}/seed{{seed}}/{i}of{k}.jsonl" for label, k in g.merged for i in range(k)]


def cell_folder(kind, g):
    return directory(f"{RESULTS}/{kind}/{g.model}/{g.backend}/{{dataset}}/seed{{seed}}")


# As the generate_cell rules: a group's model and backend are written into its paths, so that
# Snakemake matches each scores file against its own model's groups only (issue 57).
for _i, _g in enumerate(_plan.score_groups(JOBS)):

    rule:
        name:
            f"score_{_i}"
        input:
            rows=generations(_g, ".jsonl", merged=False),
            shards=merged_shards(_g),
            problems=f"{RESULTS}/data/{{dataset}}.jsonl",
            manifest=f"{RESULTS}/models/{_g.model}/manifest.json",
        output:
            # <label>.json and <label>.json.prov.json of each label (the report shows the scores)
            scores=report(
                cell_folder("scores", _g),
                patterns=["{label,[^/]+(?<!\\.prov)}.json"],  # not the .prov.json records
                caption="../report/scores.rst",
                category="Scores",
            ),
            diagnostics=[cell_folder("diagnostics", _g)] if _g.diagnosed else [],
            # a sharded label's generations, merged here from its shards (retrace.stages.score_cell)
            merged=generations(_g, ".jsonl", merged=True),
            merged_provs=generations(_g, ".jsonl.prov.json", merged=True),
        log:
            f"{RESULTS}/logs/score/{_g.model}/{_g.backend}/{{dataset}}/seed{{seed}}.log",
        wildcard_constraints:
            dataset="|".join(re.escape(d) for d in _g.datasets),
            seed="|".join(str(s) for s in _g.seeds),
        # A small job: on a cluster it runs in the controller, not as an sbatch job (profiles/slurm).
        localrule: True
        params:
            key=cell_key(_g),
            plan=PLANNED_ARGS,
            model=_g.model,
            backend=_g.backend,
        # Not an f-string: the shell string is evaluated again when the job runs (generate.smk).
        shell:
            "{PY} -m retrace score-cell {params.plan} --model {params.model} --backend {params.backend} "
            "--dataset {wildcards.dataset} --seed {wildcards.seed} > {log} 2>&1"

    # rule generate merges the same label's shards where the label is a Maj@N' partner (plan.merged_in_score)
    workflow.ruleorder(f"score_{_i}", "generate")
