# Stage model: materialise, verify (sha256) and fingerprint each declared model once.
rule model:
    output:
        manifest=f"{RESULTS}/models/{{model}}/manifest.json",
        prov=f"{RESULTS}/models/{{model}}/manifest.json.prov.json",
    log:
        f"{RESULTS}/logs/model/{{model}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/model/{{model}}.tsv"
    params:
        key=lambda w: _plan.shared_key("model", w.model, config),
        overrides=shared_args("model"),
    resources:
        mem_mb=2000,
    shell:
        "{PY} -m retrace model --model {wildcards.model} {params.overrides} "
        "--out {output.manifest} > {log} 2>&1"
