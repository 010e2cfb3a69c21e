# Stage report: the results table over every score, then an audit of its whole lineage.
rule report:
    input:
        scores=all_outputs("scores", ".json"),
    output:
        html=report(f"{RESULTS}/report/index.html", caption="../report/results.rst",
                    category="Results"),
        csv=report(f"{RESULTS}/report/results.csv", caption="../report/results.rst",
                   category="Results"),
        provs=multiext(f"{RESULTS}/report/", "index.html.prov.json", "results.csv.prov.json"),
    log:
        f"{RESULTS}/logs/report.log",
    params:
        key=lambda w: _plan.rerun_key("report", {}),
    shell:
        "{PY} -m retrace report --out-dir {RESULTS}/report {input.scores} > {log} 2>&1"


rule audit:
    input:
        csv=f"{RESULTS}/report/results.csv",
        html=f"{RESULTS}/report/index.html",
    output:
        f"{RESULTS}/report/audit.txt",
    log:
        f"{RESULTS}/logs/audit.log",
    shell:
        "{PY} -m retrace audit {input.csv} {input.html} > {output} 2> {log}"
