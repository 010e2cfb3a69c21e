"""A rehearsal slice of `paper` on the simulated engine: every method label of a model
(greedy, Maj@N, the four refinements and refine_full, both Maj@N' kinds, RM@N, beam,
lookahead), run by the real generate stage on the bundled smoke_math questions, spends no more
calls, prompt tokens or generated tokens than its bound (retrace.planning.sizing), and
retrace.app.bound_check says so. The simulated answers are short (the rehearsal's 40 tokens),
so Maj@N' prices N' with far more, far shorter samples than its cap: the case whose calls
and prompts ran 3.5-4x over the bound before the minimum sample length."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from retrace.app.bound_check import line, violations
from retrace.app.rehearse_workflow import TOKENS_MEAN
from retrace.config.compose import compose
from retrace.planning import sizing
from retrace.planning.plan import Job, jobs
from retrace.stages import generate
from retrace.store.data import prepare, write_problems

MODEL = "qwen2.5-1.5b-instruct"


def simulated(job: Job) -> Job:
    """The paper job on the simulated engine and the bundled questions, as `retrace rehearse`
    derives it: engine settings dropped, a hub reward model replaced by the policy judge."""
    over = [o for o in job.overrides if not o.startswith("backend.")]
    over.append(f"backend.engine.tokens_mean={TOKENS_MEAN}")
    method = "best_of_n" if job.method.startswith("best_of_n") else job.method  # the policy judge
    return replace(
        job, backend="simulated", dataset="smoke_math", method=method, overrides=tuple(over), shards=1
    )


@pytest.fixture(scope="module")
def slice_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("bounds")
    paper = [j for j in jobs({"experiment": "paper"}) if j.model == MODEL and j.seed == 0]
    picked = {j.label: j for j in paper if j.dataset in ("math500", "aime24")}  # refine_full: aime24
    planned = [simulated(j) for j in sorted(picked.values(), key=lambda j: bool(j.equal_compute))]
    data = root / "problems.jsonl"
    write_problems(data, prepare(compose({"dataset": "smoke_math"})["dataset"], None)[0])
    manifest = root / "manifest.json"
    manifest.write_text(json.dumps({"name": MODEL, "fingerprint": "f" * 64, "params": 1_540_000_000}))
    results = root / "results"
    for job in planned:
        out = results / "generations" / f"{job.path}.jsonl"
        partners = None
        if job.equal_compute:
            partners = tuple(
                results / "generations" / f"{replace(job, label=label).path}.jsonl"
                for label in job.equal_compute[:2]
            )
        generate.run(job, data, manifest, root / "cache", out, equal_compute_from=partners)
    return planned, results


def test_no_label_of_a_paper_slice_exceeds_its_bound(slice_run):
    planned, results = slice_run
    assert len({j.label for j in planned}) == 12 and sum(bool(j.equal_compute) for j in planned) == 2
    labels = [b.as_dict(None) for b in sizing.job_bounds(planned, None)]
    compared, found = violations(labels, results)
    assert compared == 12 and found == [], line(compared, found)
    assert line(compared, found).startswith("bound violations: 0")
    # Maj@N' priced N' from the short samples, floored, and within the N' of its bound
    bounds = {b.path: b for b in sizing.job_bounds(planned, None)}
    for job in (j for j in planned if j.equal_compute):
        prov = json.loads((results / "generations" / f"{job.path}.jsonl.prov.json").read_text())
        priced = prov["equal_compute"]
        assert priced["floored"] and 8 < priced["n_prime"] <= bounds[job.path].n_prime


def test_a_count_over_its_bound_is_named(slice_run):
    planned, results = slice_run
    labels = [b.as_dict(None) for b in sizing.job_bounds(planned, None)]
    labels[0] = {**labels[0], "generated_tokens": 1}
    compared, found = violations(labels, results)
    assert len(found) == 1 and found[0].startswith(f"{planned[0].path}: generated tokens ")
    assert "> its bound 1" in found[0] and line(compared, found).startswith("bound violations: 1")


def test_a_label_without_a_finished_generation_is_not_compared(tmp_path: Path):
    assert violations(
        [{"job": "m/b/d/l/seed0", "calls": 1, "prompt_tokens": 1, "generated_tokens": 1}], tmp_path
    ) == (
        0,
        [],
    )


def test_the_rehearsal_plans_the_bounds_from_its_own_config(tmp_path):
    """`retrace rehearse` prints the line from the run directory's derived config (no
    generation yet here: nothing compared, nothing over)."""
    from retrace.app import rehearse, rehearse_workflow

    root = rehearse_workflow.derive("refine_smoke", 1.0, rehearse.EFFECTS, tmp_path / "run")
    assert rehearse_workflow.bound_line(root, "refine_smoke").startswith("bound violations: 0 (")
    assert (root / "bounds.json").is_file()
