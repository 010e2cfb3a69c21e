"""ART's claims design (the rehearsal's and the calibration's) is what a run of art_paper
writes: each task's test items after the held-out pool, and the row set of art/summary.claims
(task-averaged rows with their pooled twins where the tasks' sizes differ) (issue 56)."""

from __future__ import annotations

import numpy as np

from retrace.art import summary
from retrace.art.stages import art_config
from retrace.scoring.design import Design, design, rows_from_cells, simulate_cells


def _art_cells(d: Design) -> dict:
    art = art_config("art_paper")
    tasks = set(art["tasks"]["library"]) | set(art["tasks"]["unseen"])
    return {task: cell["n"] for (_, task), cell in d.cells.items() if task in tasks}


def test_the_art_designs_question_counts_are_a_runs_test_items_without_the_data():
    """From the dataset configs alone (a clone): min(examples, questions - pool) per task."""
    n = _art_cells(design("art_paper", "/nonexistent"))
    assert (n["auto_debugging"], n["language_games"], n["code_line_description"]) == (24, 22, 50)
    assert n["mmlu_college_computer_science"] == n["mmlu_business_ethics"] == 90
    library = art_config("art_paper")["tasks"]["library"]
    assert sum(n[t] for t in library) == 596  # not 8 x 100


def test_the_art_designs_question_counts_equal_the_split_a_run_makes():
    """With the benchmark mirror: the design's count per task is len(test) of the very split
    a run draws (art/stages.task_split on the task's data, demonstration inputs left out)."""
    from retrace.art import plan
    from retrace.art.stages import task_split
    from retrace.config.compose import compose
    from retrace.store.data import prepare
    from tests.prerequisites import missing
    from tests.unit.test_drr_leak_mirror import MIRROR

    if not MIRROR.is_dir():
        missing("MIRROR", f"no benchmark mirror at {MIRROR} (set RETRACE_MIRROR)")
    cfg = art_config("art_paper")
    n = _art_cells(design("art_paper", str(MIRROR)))
    for task in n:
        ds = compose({"dataset": plan.dataset_of(task, cfg)})["dataset"]
        assert n[task] == len(task_split(cfg, prepare({**ds, "limit": None}, str(MIRROR))[0])[1]), task


def _scores(d: Design, cells: dict, cfg: dict) -> list[dict]:
    """art/summary score records (per model, task, label, seed) from simulated design states."""
    out = []
    for (model, task), labels in cells.items():
        if task not in _art_cells(d):
            continue
        for label, states in labels.items():
            for seed, row in zip(cfg["seeds"], states, strict=True):
                correct = {f"q{i}": float(v == 1) for i, v in enumerate(row)}
                out.append(
                    {
                        "model": model,
                        "task": task,
                        "label": label,
                        "seed": seed,
                        "correct": correct,
                        "prov_sha256": "x",
                        "search": None,
                    }
                )
    return out


def test_the_art_design_writes_the_rows_a_run_writes_with_the_same_numbers():
    """The same simulated states through art/summary.claims (a run's code) and through the
    design: the same rows (claim, dataset), the same question counts, tests and p-values. The
    task-averaged rows compare a one-draw method with 5 seeds through the sign-flip path."""
    d, cfg = design("art_paper", "/nonexistent"), art_config("art_paper")
    cells = simulate_cells(d, np.random.default_rng(0), (0.5, 1.0, 1.0))
    ran = {(r["claim"], r["dataset"]): r for r in summary.claims(cfg, _scores(d, cells, cfg))}
    planned = {(r["claim"], r["dataset"]): r for r in rows_from_cells(d, cells)}
    assert set(ran) == set(planned) and len(planned) == 21  # 15, and the claims map's three with twins
    for key, row in planned.items():
        for col in ("n_questions", "test", "delta", "p_value", "ci_low", "score_range", "n_seeds_method"):
            assert ran[key][col] == row[col] or np.isclose(ran[key][col], row[col]), (key, col)
    macro = planned[("ART beats few-shot on unseen tasks", "unseen tasks")]
    assert macro["test"] == "sign_flip_edgeworth" and macro["score_range"] > 1  # task-weighted scores
    assert "method: temperature 0, seed 0 of 5 counted" in macro["note"]
