# retrace: the table of contents. Stages live in workflow/rules/, logic in src/retrace/.
# Run: snakemake --cores 2   (the profile in profiles/default is picked up automatically)
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/generate.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/drr.smk"
include: "workflow/rules/art.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/export.smk"


rule all:
    default_target: True
    input:
        f"{RESULTS}/report/index.html",
        f"{RESULTS}/report/results.csv",
        f"{RESULTS}/report/audit.txt",
        f"{RESULTS}/report/claims.csv",
        EXTRA_TARGETS,
