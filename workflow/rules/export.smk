# Stage export (not part of `all`): the finished, audited run as a Provenance Run Crate.
#   snakemake --cores 2 export          → results/run.crate.zip
#   retrace audit --crate results/run.crate.zip   (anywhere, without the results directory)
# The crate has no .prov.json of its own: it carries its manifest and every record inside it.


# A small job: on a cluster it runs in the controller, not as an sbatch job of its own (profiles/slurm).
localrules:
    export,


rule export:
    input:
        f"{RESULTS}/report/index.html",
        f"{RESULTS}/report/results.csv",
        f"{RESULTS}/report/audit.txt",
        f"{RESULTS}/report/claims.csv",
        EXTRA_TARGETS,
    output:
        f"{RESULTS}/run.crate.zip",
    log:
        f"{RESULTS}/logs/export.log",
    shell:
        "{PY} -m retrace export --results {RESULTS} --out {output} > {log} 2>&1"
