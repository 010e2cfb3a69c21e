"""Demonstration leak: splits leave out every item a library demonstration shows, and the
leak check reports (and by default fails on) any such item a run used."""

import json

import pytest

from retrace.art import overlap, plan, stages
from retrace.art.library import LIBRARY_DIR
from retrace.store import data
from retrace.store.provenance import Provenance
from retrace.util.atomic import write_jsonl
from retrace.util.records import Problem

CFG = plan.check(
    {
        "models": ["m"],
        "backend": "llamacpp",
        "library_versions": {"base": ["base"]},
        "tasks": {"library": ["navigate"]},
        "methods": ["art"],
        "pool": 2,
        "examples": 3,
    }
)
ASK = "If you follow these instructions, do you return to the starting point?\n\n"
# BIG-bench navigate item 141 is the input of the shipped navigate demonstration #1
SHOWN = Problem(
    "bigbench_mc/navigate/141", ASK + "Take 3 steps.  Turn around. Take 3 steps.", "A", ("True", "False")
)


def _problems(n=5):
    return [
        Problem(f"n{i}", ASK + f"Take {i + 4} steps. Turn around. Take 3 steps.", "B", ("True", "False"))
        for i in range(n)
    ]


def test_splits_leave_out_items_that_a_demonstration_shows():
    inputs = plan.library_inputs(CFG)
    assert overlap.overlapping([SHOWN] + _problems(), inputs) == {
        SHOWN.id: ["base/arithmetic/navigate.txt#1"]
    }
    # near misses are not overlaps: another count, or the demonstration as part of a longer walk
    longer = Problem(
        "x", ASK + "Turn around. Take 3 steps. Turn around. Take 3 steps.", "A", ("True", "False")
    )
    assert not overlap.overlapping([longer], inputs)
    for seed in range(6):
        cfg = {**CFG, "split_seed": seed}
        pool, test = stages.task_split(cfg, [SHOWN] + _problems())
        assert SHOWN.id not in {p.id for p in pool + test} and len(pool + test) == 5
    # a task without overlap splits exactly as before
    assert stages.task_split(CFG, _problems(6)) == stages.split(_problems(6), 2, 3, 0)


def test_an_options_only_input_and_every_library_version_count(tmp_path):
    lib = tmp_path / "edit" / "reasoning"
    lib.mkdir(parents=True)
    (lib / "hyperbaton.txt").write_text(
        "Input: (A) a red big car\n(B) a big red car\nQ1: [EOQ]\nAns: (B) a big red car\n"
    )
    cfg = plan.check(
        {
            **{k: CFG[k] for k in ("models", "backend", "tasks", "methods")},
            "library_versions": {"base": ["base"], "edit": ["base", str(tmp_path / "edit")]},
        }
    )
    item = Problem(
        "h1", "Which sentence has the correct adjective order?", "B", ("a red big car", "a big red car")
    )
    assert overlap.overlapping([item], plan.library_inputs(cfg)) == {
        "h1": ["edit/reasoning/hyperbaton.txt#1"]
    }
    key = plan.split_key(cfg)
    (lib / "hyperbaton.txt").write_text(
        "Input: (A) a blue small cup\n(B) a small blue cup\nQ1: [EOQ]\nAns: (B) x\n"
    )
    assert plan.split_key(cfg) != key  # the split's rerun key follows the library's inputs


def _run(tmp_path, ids):
    out = tmp_path / "runs" / "seed0.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(out, [{"id": i, "answer": None} for i in ids])
    Provenance(
        "art_run",
        {},
        [],
        extra={
            "job": {"model": "m", "task": "navigate", "label": "art", "seed": 0},
            "data": {"test_ids": ids[1:], "pool_ids": ids[:1]},
        },
    ).write(out)
    return out


def test_the_leak_check_reports_and_fails_on_a_used_overlap(tmp_path, monkeypatch):
    monkeypatch.setattr(stages, "art_config", lambda experiment: CFG)
    d = tmp_path / "data"
    d.mkdir()
    data.write_problems(d / "bigbench_navigate.jsonl", [SHOWN] + _problems())
    clean = stages.leakcheck("x", [_run(tmp_path, ["n0", "n1", "n2"])], d, tmp_path / "clean.json")
    assert clean["verdict"] == "clean" and clean["excluded"] == {"navigate": [SHOWN.id]}
    leaky = _run(tmp_path, ["n0", SHOWN.id])
    with pytest.raises(SystemExit, match="demonstration leak"):
        stages.leakcheck("x", [leaky], d, tmp_path / "leak.json")
    result = json.loads((tmp_path / "leak.json").read_text())
    assert result["verdict"] == "leak" and result["findings"][0]["id"] == SHOWN.id
    assert result["findings"][0]["role"] == "test"
    assert stages.leakcheck("x", [leaky], d, tmp_path / "warn.json", strict=False)["n_findings"] == 1
    assert result["unseen"] == {"verdict": "clean", "tasks": {}}  # no unseen task among the runs
    from retrace.art.summary import leak_table

    table = leak_table(tmp_path / "leak.json")
    assert table["rows"][0][:4] == ["leak", 1, len(plan.library_inputs(CFG)), 1]
    assert SHOWN.id in table["rows"][0][4]


def test_library_dir_is_the_shipped_one():
    assert plan.all_library_dirs(CFG)[0].resolve() == (LIBRARY_DIR / "base").resolve()


def _with_anagrams(tmp_path):
    """The base library plus `anagrams`, the unseen word_unscrambling under another name (the
    task the shipped library held until its overlap was found: the human-written word
    unscrambling programs of feedback/ and a paraphrased description)."""
    import shutil

    lib = tmp_path / "lib"
    shutil.copytree(LIBRARY_DIR / "base", lib)
    shutil.copy(LIBRARY_DIR / "feedback/string_ops/word_unscrambling.txt", lib / "string_ops/anagrams.txt")
    index = lib / "index.yaml"
    index.write_text(
        index.read_text().replace(
            "string_ops:\n", "string_ops:\n  anagrams: Rearrange scrambled letters into an English word.\n"
        )
    )
    return lib


def test_an_unseen_task_that_is_a_library_task_renamed_is_flagged(tmp_path):
    from retrace.art import unseen
    from retrace.art.library import load_library

    library = load_library([_with_anagrams(tmp_path)])
    tasks = {  # word_unscrambling is anagrams: a paraphrased description, the same kind of input
        "word_unscrambling": (
            "Unscramble the letters into an English word.",
            [f"The word {w} is a scrambled version of the English word" for w in ("hte", "tca", "odg")],
        ),
        "tracking_shuffled_objects": (
            "Track which object each person holds after a sequence of swaps. Pick an option.",
            [
                "Alice, Bob, and Claire are playing a game. At the start of the game, they are each holding "
                "a ball: Alice has a red ball, Bob has a blue ball, and Claire has a pink ball. First, Claire "
                "and Alice swap balls. At the end of the game, Bob has the"
            ],
        ),
    }
    result = unseen.check(library, tasks)
    dup, fresh = result["tasks"]["word_unscrambling"], result["tasks"]["tracking_shuffled_objects"]
    assert dup["nearest"] == "anagrams" and dup["near_duplicate"] and dup["description"] >= unseen.DESCRIPTION
    assert not fresh["near_duplicate"] and fresh["description"] < unseen.DESCRIPTION > 0
    assert fresh["inputs"] < unseen.INPUTS
    assert result["verdict"] == "near_duplicate"
    assert unseen.near_duplicates(result) == {"word_unscrambling": "anagrams"}


def test_the_leak_check_job_flags_an_unseen_near_duplicate_without_failing(tmp_path, monkeypatch):
    cfg = plan.check(
        {
            **{k: CFG[k] for k in ("models", "backend", "methods")},
            "library_versions": {"main": [str(_with_anagrams(tmp_path))]},
            "tasks": {"library": [], "unseen": ["word_unscrambling"]},
        }
    )
    monkeypatch.setattr(stages, "art_config", lambda experiment: cfg)
    d = tmp_path / "data"
    d.mkdir()
    words = ("hte", "tca", "odg", "nru")
    problems = [
        Problem(f"w{i}", f"The word {w} is a scrambled version of the English word", "x")
        for i, w in enumerate(words)
    ]
    data.write_problems(d / "bigbench_word_unscrambling.jsonl", problems)
    run = tmp_path / "runs" / "seed0.jsonl"
    run.parent.mkdir(parents=True)
    write_jsonl(run, [{"id": "w2", "answer": None}])
    job = {"model": "m", "task": "word_unscrambling", "label": "art", "seed": 0}
    Provenance(
        "art_run", {}, [], extra={"job": job, "data": {"test_ids": ["w2"], "pool_ids": ["w0", "w1"]}}
    ).write(run)
    result = stages.leakcheck("x", [run], d, tmp_path / "leak.json")  # strict, yet no failure
    assert result["verdict"] == "clean" and result["unseen"]["verdict"] == "near_duplicate"
    assert result["unseen"]["tasks"]["word_unscrambling"]["nearest"] == "anagrams"


def _unseen_verdict(experiment: str, mirror) -> dict:
    """stages.unseen_check as the `art leakcheck` job runs it: each unseen task's description
    and the held-out pool its runs draw (its first items where the split cannot be drawn),
    against the experiment's main library version, with the real embedder."""
    from retrace.config.compose import compose, load_experiment

    cfg = plan.check(load_experiment(experiment)["art"])
    problems, records = {}, []
    for task in cfg["tasks"]["unseen"]:
        ds = compose({"dataset": plan.dataset_of(task, cfg)})["dataset"]
        problems[task], _ = data.prepare(ds, mirror)
        try:
            pool = [p.id for p in stages.task_split(cfg, problems[task])[0]]
        except ValueError:  # fewer items than pool + examples (see the report's notes)
            pool = None
        records.append({"job": {"task": task}, "data": {"pool_ids": pool}})
    return stages.unseen_check(cfg, records, problems)


def test_the_default_runs_unseen_tasks_are_not_library_tasks():
    """Unseen means unseen (issue 27): the default run's unseen tasks (bundled data, no
    mirror) are no near-duplicate of any task of its main library version."""
    from retrace.art import unseen

    result = _unseen_verdict("smoke", None)
    assert result["tasks"] and result["verdict"] == "clean", result
    for r in result["tasks"].values():
        assert r["description"] < unseen.DESCRIPTION and r["inputs"] < unseen.INPUTS


@pytest.mark.slow
def test_art_papers_unseen_tasks_are_not_library_tasks():
    """The same for art_paper's ten unseen BIG-bench and MMLU tasks (benchmark mirror)."""
    from tests.prerequisites import missing
    from tests.unit.test_drr_leak_mirror import MIRROR

    if not MIRROR.is_dir():
        missing("MIRROR", f"no benchmark mirror at {MIRROR} (set RETRACE_MIRROR)")
    result = _unseen_verdict("art_paper", MIRROR)
    assert len(result["tasks"]) == 10 and result["verdict"] == "clean", result


def test_a_task_smaller_than_pool_plus_examples_is_tested_on_the_rest(caplog):
    # art_paper asks 10 held-out + 100 test items; two MMLU subjects have only 100 questions
    pool, test = stages.split(_problems(4), 2, 3, 0)
    assert len(pool) == 2 and len(test) == 2 and not {p.id for p in pool} & {p.id for p in test}
    assert "2 test items (of 3 asked)" in caplog.text
    with pytest.raises(ValueError, match="2 problems cannot give 2 held-out items and any test item"):
        stages.split(_problems(2), 2, 3, 0)
