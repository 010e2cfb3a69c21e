# Stage claims: each paper claim as a gate (paired Δ, CI, test, verdict, evidence hashes).
from retrace.scoring import preregistered as _claims_stage


def primary_args():
    """--primary CLAIM --primary-dataset D --primary-alpha A: the experiment's primary claims."""
    primary = _claims_stage.primary_family(EXPERIMENT, config["experiment"])
    if primary is None:
        return ""
    args = [f"--primary {shlex.quote(c)}" for c in primary.claims]
    args += [f"--primary-dataset {shlex.quote(d)}" for d in primary.datasets]
    return " ".join(args + [f"--primary-alpha {primary.alpha}"])


# A small job: on a cluster it runs in the controller, not as an sbatch job of its own (profiles/slurm).
localrules:
    claims,


rule claims:
    input:
        scores=cell_folders("scores"),
        extra=EXTRA_CLAIMS,
    output:
        csv=report(f"{RESULTS}/report/claims.csv", caption="../report/claims.rst", category="Claims"),
        prov=f"{RESULTS}/report/claims.csv.prov.json",
    log:
        f"{RESULTS}/logs/claims.log",
    params:
        key=lambda w: _plan.rerun_key("claims", {"claims": family_config("claims")}),
        extra=lambda w, input: " ".join(f"--extra {p}" for p in input.extra),
        weaker=" ".join(
            f"--weaker {w},{s}" for w, s in _claims_stage.weaker_pairs(EXPERIMENT, config["experiment"])
        ),
        controls="--controls" if _claims_stage.controls_flag(EXPERIMENT, config["experiment"]) else "",
        primary=primary_args(),
        plan=PLANNED_ARGS,
    shell:
        "{PY} -m retrace claims --out {output.csv} {params.extra} {params.weaker} {params.primary} {params.controls} "
        "{params.plan} > {log} 2>&1"
