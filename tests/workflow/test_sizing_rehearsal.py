"""Every job's bound (retrace.planning.sizing) against what it really did, on the simulated engine.

A small rehearsal (retrace.app.rehearse_workflow: the real Snakefile, the simulated engine, no
model) of every spine method whose bound has its own rule: greedy, Maj@N, refinement with
per-role caps, RM@N (judged by the policy in a rehearsal) and Maj@N' at effective and nominal
compute. Then `retrace plan --estimate --json -` in the run directory bounds each job, and each
job's measured tokens (its provenance) must lie under its bound; each Maj@N' job's bound must
lie within 20 % of its refinement's, in the pair's kind. Slow: ~8 engine jobs on 2 cores.

    .venv/bin/python -m pytest -q -m slow tests/workflow/test_sizing_rehearsal.py
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from retrace.app import rehearse_workflow
from retrace.config.compose import CONFIG_DIR
from retrace.scoring.compute import structural_usage
from retrace.store.data import read_jsonl
from retrace.store.provenance import load
from tests import prerequisites
from tests.workflow.conftest import MIRROR

REFINE = "[method.sampling.max_tokens=96, method.n=3, method.depth=2, method.roles.continue.max_tokens=32, method.roles.critique.max_tokens=48, method.roles.correct.max_tokens=64]"
SIZING = f"""\
runs:
  - models: [qwen2.5-1.5b-instruct]
    backend: vllm
    datasets: [math500]
    seeds: [0]
    methods:
      - {{label: greedy, overrides: [method.sampling.max_tokens=96]}}
      - {{label: majority, overrides: [method.sampling.max_tokens=96, method.n=3]}}
      - {{label: refine, overrides: {REFINE}}}
      - {{label: best_of_n, method: best_of_n, overrides: [method.sampling.max_tokens=96, method.n=3]}}
      - {{label: majority_eq, method: majority, overrides: [method.sampling.max_tokens=96, method.n=3],
         equal_compute: {{refine: refine, majority: majority, kind: effective}}}}
      - {{label: majority_eq_nominal, method: majority, overrides: [method.sampling.max_tokens=96, method.n=3],
         equal_compute: {{refine: refine, majority: majority, kind: nominal}}}}
"""


@pytest.fixture(scope="module")
def sized_run(tmp_path_factory):
    prerequisites.mirror()  # MATH-500, the data it sizes, is the mirror's
    tmp = tmp_path_factory.mktemp("sizing")
    config = tmp / "config"
    shutil.copytree(CONFIG_DIR, config)
    (config / "experiment" / "sizing_tiny.yaml").write_text(SIZING)
    effects = tmp / "effects.yaml"
    effects.write_text("effects: []\n")
    # answers ~40 tokens (rehearse_workflow.TOKENS_MEAN): most stop under these caps, some are cut
    root = rehearse_workflow.derive("sizing_tiny", 0.05, effects, tmp / "run", MIRROR, config_dir=config)
    stats = rehearse_workflow.run_workflow(root, cores=2)
    assert stats["returncode"] == 0, stats["log"].read_text()[-4000:]
    env = rehearse_workflow._snakemake(root)[1] | {"RETRACE_MIRROR": MIRROR}
    out = subprocess.run(
        [sys.executable, "-m", "retrace", "plan", "--estimate", "--json", "-"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    bounds = json.loads(out[out.index("{") :])["labels"]  # each label's own bound
    return root, {b["job"]: b for b in bounds}


def _measured(root, job: str) -> dict:
    rows_file = root / "results" / "generations" / f"{job}.jsonl"
    usage = load(rows_file)["usage"]
    shape = structural_usage(list(read_jsonl(rows_file)))
    return {
        "generated": usage["generated_tokens_all"],
        "prompt": usage["prompt_tokens_all"],
        "nominal": usage["prompt_tokens_all"] + usage["generated_tokens_all"],
        "effective": shape["prompt"] + shape["generated"] - shape["cached_prompt"] if shape else None,
    }


@pytest.mark.slow
def test_every_jobs_bound_covers_what_it_did(sized_run):
    root, bounds = sized_run
    assert len(bounds) == 6 and all(b["size_known"] for b in bounds.values())
    for job, b in bounds.items():
        got = _measured(root, job)
        assert 0 < got["generated"] <= b["generated_tokens"], (job, got, b)
        if b["equal_compute"]:  # its bound is in the pair's FLOP kind
            kind = b["equal_compute"][1]
            assert got[kind] <= b["computed_tokens"], (job, got, b)
        else:
            assert got["prompt"] <= b["prompt_tokens"], (job, got, b)
            if got["effective"] is not None:
                assert got["effective"] <= b["computed_tokens"], (job, got, b)


@pytest.mark.slow
def test_the_equal_compute_baselines_bound_is_within_20_percent_of_its_refinements(sized_run):
    _, bounds = sized_run
    pairs = [b for b in bounds.values() if b["equal_compute"]]
    assert len(pairs) == 2
    for b in pairs:
        partner, kind = b["equal_compute"]
        p = bounds[partner]
        base = p["computed_tokens"] if kind == "effective" else p["prompt_tokens"] + p["generated_tokens"]
        assert 0.8 <= b["computed_tokens"] / base <= 1.2, (b, p)


@pytest.mark.slow
def test_the_rehearsal_reports_no_bound_violations(sized_run):
    root, bounds = sized_run
    line = rehearse_workflow.bound_line(root, "sizing_tiny")
    assert line.startswith(
        f"bound violations: 0 (calls, prompt and generated tokens of {len(bounds)} labels)"
    ), line
