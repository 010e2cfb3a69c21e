"""The exported crate against the Provenance Run Crate 0.5 profile.

Two checks: the community validator (`roc-validator`, profile `provenance-run-crate-0.5`,
REQUIRED level, which includes Workflow Run Crate, Process Run Crate, Workflow RO-Crate and
RO-Crate 1.1), run offline; and the profile's MUST rules written out here, each citing its
section of https://www.researchobject.org/workflow-run-crate/profiles/ (0.5), so a failure
names the rule without the validator's SHACL output.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from export_run import exported

PROV = "https://w3id.org/ro/wfrun/provenance/0.5"


@pytest.fixture(scope="module")
def crate_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("run")
    out = root / "unpacked"
    with zipfile.ZipFile(exported(root)) as z:
        z.extractall(out)
    return out


@pytest.fixture(scope="module")
def g(crate_dir) -> dict[str, dict]:
    return {e["@id"]: e for e in json.loads((crate_dir / "ro-crate-metadata.json").read_text())["@graph"]}


def types(e: dict) -> list[str]:
    return e["@type"] if isinstance(e["@type"], list) else [e["@type"]]


def ids(v) -> list[str]:
    return [x["@id"] for x in (v if isinstance(v, list) else [v])] if v else []


def of_type(g: dict, t: str) -> dict[str, dict]:
    return {i: e for i, e in g.items() if t in types(e)}


def offline_context():
    """The RO-Crate 1.1 JSON-LD context, offline: ro-crate-py ships the 1.3 context, which
    maps every schema.org term as 1.1 does; 1.1 maps the Bioschemas terms below differently
    (https://w3id.org/ro/crate/1.1/context), so they are set back to 1.1's IRIs."""
    import rocrate

    ctx = json.loads((Path(rocrate.__file__).parent / "data" / "ro-crate.jsonld").read_text())
    ctx["@context"].update(
        {
            "ComputationalWorkflow": "https://bioschemas.org/ComputationalWorkflow",
            "input": "https://bioschemas.org/ComputationalWorkflow#input",
            "output": "https://bioschemas.org/ComputationalWorkflow#output",
            "FormalParameter": "https://bioschemas.org/FormalParameter",
        }
    )
    return ctx


def test_roc_validator_passes_the_required_level(crate_dir, monkeypatch):
    pytest.importorskip("rocrate_validator")
    from rocrate_validator import models, services
    from rocrate_validator.utils import document_loader, http

    ctx = offline_context()

    def fetch(url):  # the only remote document a crate of ours needs; anything else is a failure
        if url.rstrip("/") != "https://w3id.org/ro/crate/1.1/context":
            raise RuntimeError(f"offline test: unexpected fetch of {url}")
        return ctx

    class Response:
        status_code, headers = 200, {"Content-Type": "application/ld+json"}
        json = staticmethod(lambda: ctx)

    monkeypatch.setattr(document_loader, "_fetch_json_ld", fetch)
    monkeypatch.setattr(
        http.HttpRequester, "get", lambda self, url, **kw: (fetch(url), Response())[1], raising=False
    )  # HttpRequester forwards get() to its session via __getattr__
    result = services.validate(
        models.ValidationSettings(
            rocrate_uri=str(crate_dir),
            profile_identifier="provenance-run-crate-0.5",
            requirement_severity=models.Severity.REQUIRED,
        )
    )
    issues = [
        f"{i.check.identifier}: {i.message} ({getattr(i, 'violatingEntity', '')})"
        for i in result.get_issues()
    ]
    assert result.passed(), "\n".join(issues)


def test_conforms_to_the_profiles(g):
    # RO-Crate 1.1 "Root Data Entity"; Process/Workflow/Provenance Run Crate "Requirements":
    # the root conformsTo each profile's versioned permalink.
    assert {"@id": "https://w3id.org/ro/crate/1.1"} in g["ro-crate-metadata.json"]["conformsTo"]
    profiles = set(ids(g["./"]["conformsTo"]))
    assert {
        "https://w3id.org/ro/wfrun/process/0.5",
        "https://w3id.org/ro/wfrun/workflow/0.5",
        PROV,
    } <= profiles
    assert all("CreativeWork" in types(g[p]) for p in profiles)


def test_main_entity_is_the_workflow_with_formal_parameters(g):
    # Workflow Run Crate: mainEntity is the ComputationalWorkflow; its input/output are
    # FormalParameters with additionalType; Provenance Run Crate: a workflow with steps is a HowTo.
    wf = g[g["./"]["mainEntity"]["@id"]]
    assert {"File", "SoftwareSourceCode", "ComputationalWorkflow", "HowTo"} <= set(types(wf))
    for p in ids(wf["input"]) + ids(wf["output"]):
        assert "FormalParameter" in types(g[p]) and g[p]["additionalType"]
    # at least one CreateAction has the main entity as instrument (the workflow run)
    assert any(ids(a.get("instrument")) == [wf["@id"]] for a in of_type(g, "CreateAction").values())


def test_steps_tools_and_their_actions(g):
    # Provenance Run Crate "Requirements": HowToStep via `step`, workExample → tool; the tool is
    # in the workflow's hasPart and is the instrument of an action; its parameters are FormalParameters.
    wf = g[g["./"]["mainEntity"]["@id"]]
    assert set(ids(wf["step"])) == set(of_type(g, "HowToStep"))
    instruments = {i for a in of_type(g, "CreateAction").values() for i in ids(a["instrument"])}
    for step in of_type(g, "HowToStep").values():
        for tool in ids(step["workExample"]):
            assert "SoftwareApplication" in types(g[tool]) and tool in ids(wf["hasPart"])
            assert tool in instruments
            assert all(
                "FormalParameter" in types(g[p]) for p in ids(g[tool].get("input")) + ids(g[tool]["output"])
            )


def test_each_step_run_is_a_create_action_under_a_control_action(g):
    # Process Run Crate: CreateAction with instrument, object, result, start/end time, agent.
    # Provenance Run Crate: ControlAction instrument → HowToStep, object → the tool's action.
    controls = of_type(g, "ControlAction")
    assert len(controls) == len([i for i in g if i.endswith(".prov.json")])
    for c in controls.values():
        assert "HowToStep" in types(g[c["instrument"]["@id"]])
        action = g[c["object"]["@id"]]
        assert "CreateAction" in types(action)
        assert action["object"] and action["result"] and action["agent"]
        assert action["startTime"] <= action["endTime"]
        for u in ids(action.get("resourceUsage")):  # "resourceUsage MUST point to PropertyValue"
            assert "PropertyValue" in types(g[u]) and g[u]["propertyID"]


def test_organize_action_drives_the_run(g):
    # Provenance Run Crate: OrganizeAction instrument → the engine, object → ControlActions,
    # result → the workflow run's CreateAction.
    (org,) = of_type(g, "OrganizeAction").values()
    assert "SoftwareApplication" in types(g[org["instrument"]["@id"]])
    assert set(ids(org["object"])) == set(of_type(g, "ControlAction"))
    run = g[org["result"]["@id"]]
    assert "CreateAction" in types(run) and run["instrument"] == g["./"]["mainEntity"]
