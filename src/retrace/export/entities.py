"""The entities of a retrace Provenance Run Crate, built with ro-crate-py (`rocrate`).

Identifiers: files keep their run paths; what is not copied is `#ref/<path or sha256>` with
its sha256; a job is `#action/<sha256 of its record>` (its ControlAction `#control/…`); a
stage is `#step/<stage>`; a tool is `#tool/<stage>/<sources hash[:12]>` (one per code
version); a config value is `#pv/<stage>/<dotted key>/<hash[:12]>`.
"""

from __future__ import annotations

import json
import mimetypes
from datetime import UTC, datetime
from typing import Any

from retrace.export.collect import Job, Run, crate_path
from retrace.util.hashing import canonical_json, sha256_text

TYPES = {str: "Text", bool: "Boolean", int: "Integer", float: "Float"}
COMPLETED = "http://schema.org/CompletedActionStatus"  # a literal, as Process Run Crate's examples


def flatten(obj, prefix: str = "") -> list[tuple[str, object]]:
    """Dotted keys and leaf values of a nested config dict (lists and None stay leaves)."""
    if isinstance(obj, dict) and obj:
        return [kv for k, v in sorted(obj.items()) for kv in flatten(v, f"{prefix}{k}.")]
    return [(prefix.rstrip("."), obj)]


def _mime(path: str) -> str:
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


def _value(v):
    return v if type(v) in TYPES else canonical_json(v)


def iso(ts: float) -> str:
    """A timestamp as ISO 8601 in UTC, to the second (the crate's dates)."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


class Builder:
    """Adds entities to one crate for one run; the functions mirror the profile's parts."""

    def __init__(self, crate, run: Run):
        self.crate, self.run = crate, run
        self.steps: dict[str, object] = {}
        self.workflow_entity: Any = None  # rocrate's workflow entity, set by workflow()
        self.workflow_outputs: list = []
        self.files: dict[str, object] = {}  # crate path -> its File entity (ids are URL-quoted)

    def context(self, id_: str, type_, **props):
        """Get or add a contextual entity (properties of a new one only)."""
        from rocrate.model.contextentity import ContextEntity

        found = self.crate.get(id_)
        if found is not None:
            return found
        return self.crate.add(ContextEntity(self.crate, id_, properties={"@type": type_, **props}))

    # -- files ---------------------------------------------------------------------------------
    def add_files(self) -> None:
        from retrace.util.hashing import sha256_file

        for rel, disk in sorted(self.run.files.items()):
            if rel == "Snakefile":
                continue  # added as the main workflow
            self.files[rel] = self.crate.add_file(
                disk,
                dest_path=rel,
                properties={
                    "name": rel,
                    "sha256": sha256_file(disk),
                    "contentSize": str(disk.stat().st_size),
                    "encodingFormat": _mime(rel),
                },
            )

    def file_entity(self, rel: str):
        """The File entity of crate path `rel`, or None. Not `crate.get(rel)`: rocrate quotes
        ids, so a path with `@` (ART's `art@feedback`) has the id `art%40feedback`."""
        return self.files.get(rel) or (self.crate.get(rel) if rel in self.run.files else None)

    def artifact(self, path: str, sha256: str):
        """The entity of an artifact or source input: the copied file, else a reference."""
        if path in self.run.sources:  # an input without a record of its own
            rel = self.run.sources[path]["crate_path"]
            if rel:
                return self.file_entity(rel)
            return self.context(
                f"#ref/{sha256}",
                "File",
                name=path,
                sha256=sha256,
                encodingFormat=_mime(path),
                description="not included: referenced by checksum",
            )
        rel = crate_path(path)
        if rel in self.run.files:
            return self.file_entity(rel)
        return self.context(
            f"#ref/{rel}",
            "File",
            name=rel,
            sha256=sha256,
            encodingFormat=_mime(rel),
            description=(
                "not included (generation, model or large file): referenced by checksum; "
                "its provenance record is in the crate"
            ),
        )

    def request_cache(self):
        """The request cache, referenced by the hash of its `sha256  path` listing (not included)."""
        from retrace.util.hashing import sha256_file

        cache = self.run.results / "cache" / "requests"
        if not cache.is_dir():
            return None
        files = sorted(p for p in cache.rglob("*") if p.is_file())
        listing = "".join(f"{sha256_file(p)}  {p.relative_to(cache)}\n" for p in files)
        return self.context(
            "#ref/request-cache",
            "CreativeWork",
            name=f"{self.run.results.name}/cache/requests",
            sha256=sha256_text(listing),
            description=(
                f"request cache, {len(files)} files, not included; sha256 of its "
                "`sha256  path` listing (sorted)"
            ),
        )

    # -- workflow, steps, tools ----------------------------------------------------------------
    def workflow(self):
        from rocrate.model.computationalworkflow import ComputationalWorkflow

        from retrace.util.hashing import sha256_file

        disk = self.run.files["Snakefile"]
        wf = self.crate.add_workflow(
            disk,
            "Snakefile",
            main=True,
            lang="snakemake",
            properties={
                "@type": [
                    "File",
                    "SoftwareSourceCode",
                    "ComputationalWorkflow",
                    "HowTo",
                ],  # HowTo: it has steps
                "name": "retrace workflow",
                "sha256": sha256_file(disk),
                "contentSize": str(disk.stat().st_size),
                "encodingFormat": "text/x-snakemake",
            },
            cls=ComputationalWorkflow,
        )
        config = self.file_entity("config/config.yaml")
        wf["input"] = [self.param("#param/workflow/config", "File", "config/config.yaml", workExample=config)]
        if config is not None:
            config["exampleOfWork"] = wf["input"]
        commits = {j.record.get("code", {}).get("commit") for j in self.run.jobs} - {None}
        if commits:
            wf["version"] = ", ".join(sorted(commits))  # the git commit(s) the run used
        self.workflow_outputs = [
            self.param(f"#param/workflow/{n}", "File", n) for n in ("index.html", "results.csv", "claims.csv")
        ]
        wf["output"] = self.workflow_outputs
        self.workflow_entity = wf
        return wf

    def param(self, id_: str, additional_type: str, name: str, **props):
        return self.context(
            id_,
            "FormalParameter",
            name=name,
            additionalType=additional_type,
            conformsTo={"@id": "https://bioschemas.org/profiles/FormalParameter/1.0-RELEASE"},
            **props,
        )

    def step(self, stage: str):
        if stage not in self.steps:
            self.steps[stage] = self.context(
                f"#step/{stage}", "HowToStep", name=stage, position=str(len(self.steps))
            )
            self.workflow_entity.append_to("step", self.steps[stage])
        return self.steps[stage]

    def tool(self, job: Job):
        """One SoftwareApplication per (stage, code version); its parts are the source files."""
        rec, stage = job.record, job.record["stage"]
        code = rec.get("code", {})
        h = code.get("sources_hash", "")
        tid = f"#tool/{stage}/{h[:12]}"
        new = self.crate.get(tid) is None
        tool = self.context(
            tid,
            "SoftwareApplication",
            name=f"retrace {stage}",
            identifier=h,
            softwareVersion=f"{code.get('commit')}{'+dirty' if code.get('dirty') else ''}",
            description="`python -m retrace " + stage + "`; identifier = "
            "retrace.util.hashing.hash_sources of its source files",
        )
        if new:
            parts = [self.file_entity(s) for s in self.run.code.get(h, [])]
            if parts:
                tool["hasPart"] = parts
            tool["output"] = [self.param(f"#param/{stage}/artifact", "File", f"{stage} artifact")]
            self.workflow_entity.append_to("hasPart", tool)
            self.step(stage).append_to("workExample", tool)
        for key, value in flatten(rec.get("config", {})):
            p = self.param(f"#param/{stage}/{key}", TYPES.get(type(value), "Text"), key)
            if p not in (tool.get("input") or []):
                tool.append_to("input", p)
        return tool

    def engine(self):
        versions = {j.record.get("packages", {}).get("snakemake") for j in self.run.jobs} - {None}
        return self.context(
            "#snakemake",
            "SoftwareApplication",
            name="Snakemake",
            url="https://snakemake.readthedocs.io",
            softwareVersion=", ".join(sorted(versions)) or None,
        )

    # -- one job ---------------------------------------------------------------------------------
    def job(self, job: Job, person):
        """The CreateAction of one record and the ControlAction that ran it; returns the latter."""
        rec, stage = job.record, job.record["stage"]
        tool = self.tool(job)
        result = [self.artifact(job.artifact, rec["artifact"]["sha256"])]
        result += [self.artifact(c["path"], c["sha256"]) for c in rec.get("companions", [])]
        for r in result:
            r["exampleOfWork"] = self.crate.get(f"#param/{stage}/artifact")
        obj = [self.artifact(i["path"], i["sha256"]) for i in rec.get("inputs", [])]
        source = rec.get("config", {}).get("model", {}).get("source") if stage == "model" else None
        for o in obj:
            if source and o.id.startswith("#ref/"):  # the weights: say where they come from
                o["description"] = f"model weights, not included; source: {canonical_json(source)}"
        obj += self.values(stage, rec) + self.fingerprints(rec)
        action = self.context(
            f"#action/{job.record_sha256}",
            "CreateAction",
            name=f"{stage}: {job.artifact}",
            instrument=tool,
            object=obj,
            description=f"`python -m retrace {stage}` wrote {job.artifact}; "
            f"its provenance record is {job.record_path}",
            result=result,
            agent=person,
            actionStatus=COMPLETED,
            startTime=iso(rec["timing"]["started"]),
            endTime=iso(rec["timing"]["finished"]),
            subjectOf=self.file_entity(job.record_path),
            location=self.host(rec.get("host", {})),
            resourceUsage=self.usage(job),
        )
        self.file_entity(job.record_path)["about"] = action
        return self.context(
            f"#control/{job.record_sha256}",
            "ControlAction",
            name=f"run {stage}",
            instrument=self.step(stage),
            object=action,
        )

    def values(self, stage: str, rec: dict) -> list:
        out = []
        for key, value in flatten(rec.get("config", {})):
            v = _value(value)
            out.append(
                self.context(
                    f"#pv/{stage}/{key}/{sha256_text(json.dumps(v))[:12]}",
                    "PropertyValue",
                    name=key,
                    propertyID=key,
                    value=v,
                    exampleOfWork=self.crate.get(f"#param/{stage}/{key}"),
                )
            )
        return out

    def fingerprints(self, rec: dict) -> list:
        return [
            self.context(
                f"#fingerprint/{kind}/{rec[kind]['fingerprint']}",
                "PropertyValue",
                name=f"{kind} fingerprint ({rec[kind].get('name')})",
                propertyID=f"{kind}.fingerprint",
                value=rec[kind]["fingerprint"],
            )
            for kind in ("model", "data")
            if isinstance(rec.get(kind), dict) and rec[kind].get("fingerprint")
        ]

    def host(self, host: dict):
        text = canonical_json(host)
        return self.context(
            f"#host/{sha256_text(text)[:12]}",
            "Place",
            name=host.get("hostname", "unknown host"),
            description=text,
        )

    def usage(self, job: Job) -> list:
        rec = job.record
        nums = [("timing.seconds", rec["timing"].get("seconds"))]
        nums += [(f"usage.{k}", v) for k, v in flatten(rec.get("usage", {}))]
        nums += [(f"flops.{k}", v) for k, v in flatten(rec.get("flops", {}))]
        return [
            self.context(
                f"#usage/{job.record_sha256[:16]}/{k}", "PropertyValue", name=k, propertyID=k, value=v
            )
            for k, v in nums
            if type(v) in (int, float)
        ]
