"""retrace.stages.generate_cell and retrace.planning.cells: one engine per cell, each label's own files.

- On the simulated engine (no model): a cell job writes every label's generations byte for
  byte as per-label `generate` jobs do, prices a Maj@N' label after its partners, and a rerun
  after one label changed sends the engine only that label's requests.
- On the scripted engine behind a vLLM-configured cell: labels share one engine, loaded once,
  and a later label's requests that an earlier label made are not generated again.
- Plans: the cell job's rerun key follows each label's (parts and loads: test_parts.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from fake_backend import manifest as fake_manifest

from retrace.backends.scripted import ScriptedBackend
from retrace.engine.llm import CachedLLM
from retrace.planning.cells import cell_generate_key, generation_cells
from retrace.planning.plan import Job
from retrace.stages import generate, generate_cell
from retrace.store.data import write_problems
from retrace.util.records import Problem

MODEL = "smollm2-135m-q41"
OVER = ("method.sampling.max_tokens=4096",)


def layout(tmp_path: Path) -> Path:
    """A results folder as the workflow lays it out: data and the model's manifest."""
    results = tmp_path / "results"
    write_problems(
        results / "data" / "math500.jsonl",
        [Problem(id=f"q{i:03d}", question=f"What is {i} + 1?", gold=str(i + 1)) for i in range(12)],
    )
    m = results / "models" / MODEL / "manifest.json"
    m.parent.mkdir(parents=True)
    m.write_text(json.dumps({"name": MODEL, "fingerprint": "f" * 64, "params": 135_000_000}))
    return results


def sim(label: str, method: str, over: tuple = (), eq: tuple = ()) -> Job:
    return Job(MODEL, "simulated", "math500", label, method, 0, OVER + over, eq)


CELL = (
    sim("greedy", "greedy"),
    sim("majority", "majority", ("method.n=3",)),
    sim("refine", "refine", ("method.n=2", "method.depth=1")),
    sim("majority_eq", "majority", ("method.n=3",), ("refine", "majority", "effective")),
)


CELL_KEY = (MODEL, "simulated", "math500", 0)


def generations(results: Path, job: Job) -> bytes:
    return (results / "generations" / f"{job.path}.jsonl").read_bytes()


def test_a_cell_job_writes_what_per_label_jobs_write(tmp_path):
    cell_results, label_results = layout(tmp_path / "cell"), layout(tmp_path / "labels")
    generate_cell.run_labels(CELL, cell_results, tmp_path / "cell-cache")
    for job in CELL:
        eq = None
        if job.equal_compute:
            eq = tuple(
                label_results / "generations" / f"{generate_cell.sibling(job, x).path}.jsonl"
                for x in job.equal_compute[:2]
            )
        generate.run(
            job,
            label_results / "data" / "math500.jsonl",
            label_results / "models" / MODEL / "manifest.json",
            tmp_path / "label-cache",
            label_results / "generations" / f"{job.path}.jsonl",
            equal_compute_from=eq,
        )
        assert generations(cell_results, job) == generations(label_results, job), job.label
        prov = json.loads((cell_results / "generations" / f"{job.path}.jsonl.prov.json").read_text())
        assert prov["job"]["label"] == job.label
    prov = json.loads((cell_results / "generations" / f"{CELL[3].path}.jsonl.prov.json").read_text())
    assert prov["equal_compute"]["n_prime"] >= 1  # priced from its partners in the same job


def test_a_part_runs_only_its_labels_and_reads_earlier_partners(tmp_path, monkeypatch):
    """A cell cut into parts (retrace.planning.parts): the part with the Maj@N' label runs it alone,
    priced from its partners' generations that an earlier part wrote; an unknown label is refused."""
    results = layout(tmp_path)
    monkeypatch.setattr(generate_cell, "generation_cells", lambda planned: {CELL_KEY: CELL})
    monkeypatch.setattr(generate_cell, "jobs", lambda cfg: list(CELL))
    first = generate_cell.run(
        "x", (), CELL_KEY, results, tmp_path / "cache", ("greedy", "majority", "refine")
    )
    assert set(first) == {"greedy", "majority", "refine"}
    assert not (results / "generations" / f"{CELL[3].path}.jsonl").exists()
    second = generate_cell.run("x", (), CELL_KEY, results, tmp_path / "cache", ("majority_eq",))
    assert set(second) == {"majority_eq"}
    prov = json.loads((results / "generations" / f"{CELL[3].path}.jsonl.prov.json").read_text())
    assert prov["equal_compute"]["n_prime"] >= 1
    with pytest.raises(ValueError, match="runs no unsharded label 'nope'"):
        generate_cell.run("x", (), CELL_KEY, results, tmp_path / "cache", ("nope",))


def test_a_changed_label_sends_the_engine_only_its_own_requests(tmp_path):
    results = layout(tmp_path)
    generate_cell.run_labels(CELL[:2], results, tmp_path / "cache")
    changed = (CELL[0], sim("majority", "majority", ("method.n=4",)))
    usage = generate_cell.run_labels(changed, results, tmp_path / "cache")
    assert (
        usage["greedy"]["engine_loads"] == 0 and usage["greedy"]["cache_hits"] == usage["greedy"]["requests"]
    )
    majority = usage["majority"]
    assert (
        majority["requests"] == 12 * 4 and majority["requests"] - majority["cache_hits"] == 12
    )  # sample 3 only


def test_labels_of_a_cell_share_one_engine_and_its_requests(tmp_path, monkeypatch):
    """vLLM-configured labels that differ only in memory share (one engine identity) on the
    scripted engine: one load, at the smaller share; the second label's first three samples
    are the first label's, served from the cache."""
    results = layout(tmp_path)
    engines: list[ScriptedBackend] = []

    def scripted(manifest, cfg, cache):
        def factory():
            engines.append(ScriptedBackend(fake_manifest(), {"script": [r"\boxed{1}"]}))
            return engines[-1]

        return CachedLLM(factory, "scripted", manifest, cache)

    monkeypatch.setattr(generate_cell, "engine", scripted)
    shares: list[float] = []
    monkeypatch.setattr(
        generate_cell,
        "engine",
        lambda m, cfg, c: (
            shares.append(cfg["backend"]["engine"]["gpu_memory_utilization"]) or scripted(m, cfg, c)
        ),
    )
    # b keeps GPU memory free (as best-of-N for its reward model): the one engine takes its share
    cell = tuple(
        Job(MODEL, "vllm", "math500", label, "majority", 0, (f"method.n={n}", *over))
        for label, n, over in (("a", 3, ()), ("b", 4, ("backend.engine.gpu_memory_utilization=0.6",)))
    )
    usage = generate_cell.run_labels(cell, results, tmp_path / "cache")
    assert shares == [0.6]
    assert len(engines) == 1 and engines[0].calls > 0
    assert len(engines[0].requests_seen) == 12 * 4  # 3 per problem for a, 1 more for b
    assert (usage["a"]["engine_loads"], usage["b"]["engine_loads"]) == (1, 0)
    assert usage["b"]["cache_hits"] == 12 * 3
    # each label's provenance records the engine as it ran: a's at b's share, not its own
    for label in ("a", "b"):
        prov = json.loads(
            (results / "generations" / f"{MODEL}/vllm/math500/{label}/seed0.jsonl.prov.json").read_text()
        )
        assert prov["engine"]["engine"]["gpu_memory_utilization"] == 0.6


def paper() -> list[Job]:
    from retrace.planning.plan import jobs

    return jobs({"experiment": "paper"})


def test_cell_jobs_run_partners_first_and_leave_sharded_labels_out():
    planned = paper()
    for cell in generation_cells(planned).values():
        labels = [j.label for j in cell]
        if cell[0].model != "qwen2.5-math-7b":  # shards: 3 on the 32k models: its own shard jobs
            assert "majority_eq_nominal" not in labels
        assert labels.index("majority_eq") > max(labels.index("refine"), labels.index("majority"))
    assert len(generation_cells(planned)) == 60


def test_the_cell_key_changes_with_any_label_and_only_its_cell():
    cell = generation_cells(paper())
    first, second = list(cell.values())[:2]
    key = cell_generate_key(first)
    greedy = first[0]
    changed = (replace(greedy, overrides=greedy.overrides + ("method.sampling.max_tokens=64",)),) + first[1:]
    assert cell_generate_key(changed) != key
    assert cell_generate_key(second) != key and cell_generate_key(first) == key
