"""Unseen means unseen: does an unseen task near-duplicate a task of the library?

    check(library, {"word_unscrambling": ("Unscramble the letters…", ["The word hte is…", …])})
    # {"verdict": "clean", "tasks": {"word_unscrambling": {"nearest": "language_games", …}}}

ART's claims about unseen tasks (the paper's §5: tasks the library does not contain) mean
nothing if an "unseen" task is a library task under another name. Each unseen task is
compared with every library task, with the embedder task selection uses (all-MiniLM-L6-v2,
art/select.py), on two things:
- description: its eval_tasks.yaml description against the library task's index.yaml
  description (cosine similarity);
- input format: its held-out inputs against the library task's demonstration inputs (for
  each input, the best cosine with a demonstration input; the mean over inputs).
A task at or over either threshold is a near-duplicate. The `art leakcheck` job runs this
check beside the demonstration-leak check; the report lists every unseen task with its
nearest library task and scores, and the notes of claims about unseen tasks name the
near-duplicates among them.

Thresholds, measured with the pools the runs draw (2026-12-04): against the shipped base
library, every unseen task of smoke and art_paper scores at most 0.45 on descriptions
(tracking_shuffled_objects ~ logical_deduction 0.447, word_unscrambling ~ language_games 0.441
and ~ kth_letter_concatenation 0.434) and 0.37 on inputs (temporal_sequences ~
date_understanding 0.367). A near-duplicate scores well over: an `anagrams` library task
("Rearrange scrambled letters into an English word", with the word unscrambling programs;
tests/unit/test_art_overlap.py builds one) scores 0.73 / 0.49 against word_unscrambling, and the feedback
version's word_unscrambling task (the paper's human feedback for that task, by design; the
check runs against the main version only) scores 1.00 / 0.49. Not caught: a duplicate
described and formatted differently (paraphrased inputs with another template).
"""

from __future__ import annotations

DESCRIPTION = 0.6  # cosine of descriptions at or over which two tasks are the same task
INPUTS = 0.45  # mean best cosine of inputs at or over which two tasks share an input format


def check(library, tasks: dict[str, tuple[str, list[str]]]) -> dict:
    """{"verdict", "thresholds", "embedder", "tasks": {task: {nearest, description, inputs,
    near_duplicate}}} for `tasks` = {unseen task: (description, example inputs)}."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(
        1
    )  # a few dozen short texts: extra threads only contend (7x slower on 2 busy cores)
    try:
        return _check(library, tasks)
    finally:
        torch.set_num_threads(threads)


def _check(library, tasks: dict[str, tuple[str, list[str]]]) -> dict:
    from retrace.art.minilm import minilm
    from retrace.art.program import parse

    model, about = minilm()
    names = list(library.tasks)
    descs = model.encode([library.tasks[n].description for n in names], normalize_embeddings=True)
    demo_inputs = {n: [parse(d).input for d in library.tasks[n].demos] for n in names}
    demos = {n: model.encode(demo_inputs[n], normalize_embeddings=True) for n in names}
    out = {}
    for task, (description, inputs) in tasks.items():
        d = model.encode([description], normalize_embeddings=True)[0] @ descs.T
        x = model.encode(inputs, normalize_embeddings=True) if inputs else None
        scores = {}
        for i, n in enumerate(names):
            s_in = float((x @ demos[n].T).max(axis=1).mean()) if x is not None else 0.0
            scores[n] = (round(float(d[i]), 4), round(s_in, 4))
        nearest = max(names, key=lambda n: max(scores[n][0] / DESCRIPTION, scores[n][1] / INPUTS))
        desc_s, in_s = scores[nearest]
        out[task] = {
            "nearest": nearest,
            "description": desc_s,
            "inputs": in_s,
            "near_duplicate": desc_s >= DESCRIPTION or in_s >= INPUTS,
        }
    return {
        "verdict": "near_duplicate" if any(t["near_duplicate"] for t in out.values()) else "clean",
        "thresholds": {"description": DESCRIPTION, "inputs": INPUTS},
        "embedder": about,
        "tasks": out,
    }


def near_duplicates(result: dict) -> dict[str, str]:
    """{unseen task: the library task it near-duplicates} from a `check` result."""
    return {t: r["nearest"] for t, r in (result.get("tasks") or {}).items() if r["near_duplicate"]}
