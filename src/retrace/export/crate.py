"""Write a run as a Provenance Run Crate 0.5 (Workflow Run RO-Crate family), zipped.

    retrace export --results results --out run.crate.zip [--include-generations]

Layout (https://www.researchobject.org/workflow-run-crate/profiles/provenance_run_crate):
the Snakefile is the main entity (ComputationalWorkflow + HowTo) with a HowToStep per stage
and a tool (SoftwareApplication) per stage and code version; every provenance record becomes
a CreateAction (instrument = tool, object = inputs + config slice as PropertyValues + model
and data fingerprints, result = artifact, start/end time, agent, resourceUsage, location =
host) and a ControlAction (instrument = step); one OrganizeAction (instrument = Snakemake)
drives them and has the workflow run (CreateAction of the Snakefile) as result. Files keep the
paths the run used, so records' input paths resolve inside the crate. `manifest-sha256.txt`
lists the sha256 of every file, ro-crate-metadata.json included (see export/verify.py).
"""

from __future__ import annotations

import getpass
import os
import tempfile
import zipfile
from pathlib import Path

from retrace.export.collect import Job, Run, collect
from retrace.export.entities import COMPLETED, Builder, iso
from retrace.util.hashing import sha256_file

PROFILES = {  # conformsTo of the root data entity (Provenance Run Crate 0.5, "Root Data Entity")
    "https://w3id.org/ro/wfrun/process/0.5": "Process Run Crate",
    "https://w3id.org/ro/wfrun/workflow/0.5": "Workflow Run Crate",
    "https://w3id.org/ro/wfrun/provenance/0.5": "Provenance Run Crate",
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0": "Workflow RO-Crate",
}
# Terms the RO-Crate 1.1 context lacks, as a local context (RO-Crate 1.1 "Extending RO-Crate"):
# resourceUsage from the Workflow Run vocabulary, sha256 from schema.org (newer than 1.1's).
EXTRA_TERMS = {
    "resourceUsage": "https://w3id.org/ro/terms/workflow-run#resourceUsage",
    "sha256": "http://schema.org/sha256",
}
MANIFEST = "manifest-sha256.txt"
METADATA = "ro-crate-metadata.json"
MAIN_OUTPUTS = ("report/index.html", "report/results.csv", "report/claims.csv")
_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed zip timestamps: the same run exports the same bytes


def build(run: Run, agent: str):
    """The ROCrate object for `run` (not written yet)."""
    from rocrate.rocrate import ROCrate

    crate = ROCrate(version="1.1")
    crate.metadata.extra_terms.update(EXTRA_TERMS)
    b = Builder(crate, run)
    crate.name = f"retrace run ({run.results.name})"
    crate.description = (
        "A retrace run (LLM test-time reasoning): workflow, configuration, "
        "provenance records and results, as a Provenance Run Crate."
    )
    crate.datePublished = iso(max(j.record["timing"]["finished"] for j in run.jobs))
    crate.license = b.context("https://spdx.org/licenses/Apache-2.0", "CreativeWork", name="Apache-2.0")
    crate.root_dataset["conformsTo"] = [
        b.context(u, "CreativeWork", name=n, version=u.rsplit("/", 1)[1]) for u, n in PROFILES.items()
    ]
    b.add_files()
    workflow = b.workflow()
    person = b.context(f"#agent/{agent}", "Person", name=agent)
    crate.root_dataset["author"] = person
    controls = [b.job(job, person) for job in sorted(run.jobs, key=_start)]
    wf_run = _workflow_run(b, run, workflow, person)
    b.context(
        "#engine-run",
        "OrganizeAction",
        name="Snakemake orchestration of the run",
        instrument=b.engine(),
        object=controls,
        result=wf_run,
        startTime=wf_run["startTime"],
        endTime=wf_run["endTime"],
    )
    crate.root_dataset["mentions"] = [wf_run] + [crate.get(c["object"].id) for c in controls]
    return crate


def _start(job: Job) -> tuple:
    return job.record["timing"]["started"], job.record_path


def _workflow_run(b: Builder, run: Run, workflow, person):
    outputs = [b.file_entity(f"{run.results.name}/{o}") for o in MAIN_OUTPUTS]
    outputs = [o for o in outputs if o is not None]
    for o, param in zip(outputs, b.workflow_outputs):
        o["exampleOfWork"] = param
    inputs = [e for e in (b.file_entity("config/config.yaml"), b.request_cache()) if e is not None]
    return b.context(
        "#run",
        "CreateAction",
        name="retrace workflow run",
        instrument=workflow,
        description="the Snakemake run of the retrace workflow that made this crate's results",
        actionStatus=COMPLETED,
        object=inputs,
        result=outputs,
        agent=person,
        startTime=iso(min(j.record["timing"]["started"] for j in run.jobs)),
        endTime=iso(max(j.record["timing"]["finished"] for j in run.jobs)),
    )


def write_zip(crate, out: Path) -> Path:
    """Write the crate and its manifest into `out` (deterministic order and timestamps)."""
    out = Path(out)
    with tempfile.TemporaryDirectory() as tmp:
        crate.write(tmp)
        root = Path(tmp)
        names = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        (root / MANIFEST).write_text("".join(f"{sha256_file(root / n)}  {n}\n" for n in names))
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(out.name + ".part")
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            for n in [METADATA, MANIFEST] + [n for n in names if n != METADATA]:
                info = zipfile.ZipInfo(n, _EPOCH)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                z.writestr(info, (root / n).read_bytes())
        os.replace(part, out)
    return out


def export(results: Path, out: Path, include_generations: bool = False, agent: str | None = None) -> Path:
    """Package the run under `results` as a zipped Provenance Run Crate at `out`."""
    run = collect(results, include_generations)
    return write_zip(build(run, agent or _default_agent()), out)


def _default_agent() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return "unknown"
