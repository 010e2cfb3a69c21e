"""Rerun keys cover what changes a stage's output, stated from the output's side (issue 45).

Each test names, independently of retrace.planning.plan's and retrace.planning.closure's own lists, a change that
must change an artifact (an edit to the code that renders a prompt or extracts an answer, another
engine version, another engine setting) and checks that the stage's key changes with it. Run:

    .venv/bin/python -m pytest -q tests/unit/test_rerun_keys.py
"""

from __future__ import annotations

import importlib.metadata
import inspect
from pathlib import Path

import pytest

from retrace.config.compose import compose, load_experiment
from retrace.planning import closure, plan
from retrace.util import hashing
from retrace.util.registry import TASKS

SMOKE = {"model": "smollm2-135m-q41", "backend": "llamacpp", "dataset": "smoke_math", "method": "greedy"}


def job_cfg(*overrides: str, **selections: str) -> dict:
    cfg = compose({**SMOKE, **selections}, overrides)
    cfg["seed"] = 0
    return cfg


@pytest.fixture
def edit(monkeypatch):
    """edit(path): hash `path` from then on as if it held a harmless edit (a new comment)."""
    real, edited = hashing.sha256_file, set()

    def fake(path):
        digest = real(path)
        return hashing.sha256_text(digest + "# edited") if Path(path).resolve() in edited else digest

    monkeypatch.setattr(hashing, "sha256_file", fake)
    plan._sources_hash.cache_clear()
    yield lambda path: (edited.add(Path(path).resolve()), plan._sources_hash.cache_clear())
    plan._sources_hash.cache_clear()


def source_of(method) -> Path:
    """The file that defines `method` as the running process loaded it (not a list of plan's)."""
    return Path(inspect.getsourcefile(method)).resolve()


def test_a_refinement_that_carries_forward_reruns_when_its_answer_extractor_changes(edit):
    """refine with carry_forward asks the task's extractor whether a round found an answer
    (methods/refine.py has_answer): the extractor's code shapes the generations file."""
    cfg = job_cfg("method.carry_forward=true", method="refine")
    task = type(TASKS.get(cfg["dataset"]["task"]))
    for f in (source_of(task.extract), source_of(task.extract_answer)):
        base = plan.rerun_key("generate", cfg)
        edit(f)
        assert plan.rerun_key("generate", cfg) != base, f"editing {f} leaves the generate key unchanged"


@pytest.mark.parametrize("method", ["greedy", "majority", "refine", "beam"])
def test_every_generation_reruns_when_the_prompt_rendering_code_changes(edit, method):
    """Every method's requests start from the task's prompt (methods/base.py task_prompt calls
    Task.prompt): the code that renders it shapes every generations file."""
    cfg = job_cfg(method=method)
    task = type(TASKS.get(cfg["dataset"]["task"]))
    base = plan.rerun_key("generate", cfg)
    edit(source_of(task.prompt))
    assert plan.rerun_key("generate", cfg) != base


def test_scoring_reruns_when_the_shared_answer_extraction_changes(edit):
    """tasks/base.py holds the extraction every task shares: score and diagnose judge with it."""
    cfg = job_cfg(method="refine")
    shared = source_of(type(TASKS.get("smoke_math")).extract_answer)
    assert shared.name == "base.py"
    keys = {stage: plan.rerun_key(stage, cfg) for stage in ("score", "diagnose", "data")}
    edit(shared)
    for stage, base in keys.items():
        assert plan.rerun_key(stage, cfg) != base, f"the {stage} key ignores {shared}"


@pytest.mark.parametrize("stage", ["generate", "probe"])
def test_another_engine_version_reruns_what_the_engine_computed(stage, monkeypatch):
    """llama.cpp reaches retrace through the xllamacpp package: another release may sample,
    tokenize or round differently, so the stages that run the engine rerun."""
    cfg = job_cfg()
    closure.engine_versions.cache_clear()
    base = plan.rerun_key(stage, cfg)
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda pkg: "0.0.0+other" if pkg == "xllamacpp" else real(pkg)
    )
    closure.engine_versions.cache_clear()
    try:
        assert plan.rerun_key(stage, cfg) != base
    finally:
        monkeypatch.undo()
        closure.engine_versions.cache_clear()
    assert plan.rerun_key(stage, cfg) == base


@pytest.mark.parametrize(
    "setting", ["backend.engine.n_threads=7", "backend.engine.n_parallel=3", "backend.engine.n_batch=64"]
)
def test_the_probe_reruns_when_an_engine_setting_changes(setting):
    """The probe measures the engine's raw throughput, which its settings decide."""
    assert plan.rerun_key("probe", job_cfg(setting)) != plan.rerun_key("probe", job_cfg())


def test_the_probe_does_not_rerun_for_another_method():
    assert plan.rerun_key("probe", job_cfg(method="majority")) == plan.rerun_key("probe", job_cfg())


def test_the_ci_stamp_of_the_vllm_workflow_follows_its_rerun_keys(edit, capsys):
    """.ci/run reruns the vllm_plumbing workflow when the keys .ci/rerun_keys.py prints change:
    an edit to the served client, the request cache or a method it runs changes them; the
    server (serve.py) and the in-process backend it is compared with are no job's code, so
    .ci/run names them among VLLM_PATHS."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rerun_keys", plan.PKG.parents[1] / ".ci" / "rerun_keys.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)

    from retrace.planning import cells

    def printed() -> str:
        plan.job_rerun_key.cache_clear()
        cells._driver_hash.cache_clear()
        script.main("vllm_plumbing")
        return capsys.readouterr().out

    base = printed()
    assert base.count("\ngenerate ") + base.startswith("generate ") >= 6 and "art.run " in base
    # stages/generate_cell.py: the driver of the cell jobs the workflow runs, in no label's key
    for f in ("backends/served.py", "store/cache_store.py", "methods/majority.py", "stages/generate_cell.py"):
        edit(plan.PKG / f)
        assert printed() != base, f"editing {f} leaves the vLLM workflow's stamp unchanged"
        base = printed()
    ci = (plan.PKG.parents[1] / ".ci" / "run").read_text()
    paths = ci.split('VLLM_PATHS="', 1)[1].split('"', 1)[0].split()
    assert {"src/retrace/app/serve.py", "src/retrace/backends/vllm.py"} <= set(paths)


def test_the_claims_rerun_when_the_pre_registered_comparisons_change():
    """The claims stage's verdicts depend on which claims are primary, their datasets and alpha
    (Holm's family) and on the pre-registered weaker/stronger pairs."""
    paper = load_experiment("paper")["claims"]
    base = plan.rerun_key("claims", {"claims": paper})
    assert (
        plan.rerun_key("claims", {"claims": {**paper, "primary": {**paper["primary"], "alpha": 0.05}}})
        != base
    )
    assert plan.rerun_key("claims", {"claims": {**paper, "weaker": paper["weaker"][:1]}}) != base
    assert plan.rerun_key("claims", {"claims": {}}) != base
    assert plan.rerun_key("claims", {"claims": None}) == plan.rerun_key("claims", {"claims": {}})
