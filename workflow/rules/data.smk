# Stage data: load a dataset (bundled, mirror or hub), subset it, write canonical problems.
# A small job: on a cluster it runs in the controller, not as an sbatch job of its own (profiles/slurm).
localrules:
    data,


rule data:
    output:
        problems=f"{RESULTS}/data/{{dataset}}.jsonl",
        prov=f"{RESULTS}/data/{{dataset}}.jsonl.prov.json",
    log:
        f"{RESULTS}/logs/data/{{dataset}}.log",
    params:
        key=lambda w: _plan.shared_key("data", w.dataset, config),
        overrides=shared_args("dataset"),
        # the files the stage reads, by content (retrace.planning.sources): not where the
        # mirror is, nor whether one exists beside a run whose data are bundled
        source=lambda w: _sources.data_source(
            w.dataset, config["mirror"], _plan.shared_overrides(config, "dataset")
        ),
    shell:
        "{PY} -m retrace data --dataset {wildcards.dataset} --mirror {MIRROR:q} "
        "{params.overrides} --out {output.problems} > {log} 2>&1"
