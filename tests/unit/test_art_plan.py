"""The `art:` block: checked keys, jobs, and rerun keys that hash exactly the library files used."""
import shutil

import pytest

from retrace.art import plan
from retrace.art.library import LIBRARY_DIR

CFG = plan.check({"models": ["m"], "backend": "llamacpp",
                  "library_versions": {"base": ["base"], "feedback": ["base", "feedback"]},
                  "tasks": {"library": ["arithmetic"], "unseen": ["word_unscrambling"]},
                  "methods": ["fewshot", "art", "art_sc"],
                  "feedback": {"version": "feedback", "tasks": ["word_unscrambling"]}, "n_tasks": 2})


def test_jobs_cover_tasks_methods_and_the_edited_library():
    labels = {(j.task, j.label) for j in plan.jobs(CFG)}
    assert ("word_unscrambling", "art@feedback") in labels and ("arithmetic", "art@feedback") not in labels
    assert len(labels) == 2 * 3 + 1
    job = plan.ArtJob("m", "word_unscrambling", "art@feedback", 0)
    assert job.method == "art" and plan.job_version(CFG, job) == "feedback"


@pytest.mark.parametrize("block, match", [
    ({"methods": ["art", "magic"]}, "unknown method 'magic'"),
    ({"tasks": {"unseen": ["nope"]}}, "unknown task 'nope'"),
    ({"tasks": {"library": ["word_unscrambling"]}}, "not a library task"),
    ({"colour": 1}, "unknown key"),
    ({"settings": {"max_stepz": 3}}, "max_stepz"),
    ({"feedback": {"version": "v9", "tasks": []}}, "v9"),
])
def test_bad_blocks_are_refused_by_name(block, match):
    base = {"models": ["m"], "backend": "llamacpp", "tasks": {"library": ["arithmetic"]}, "methods": ["art"]}
    with pytest.raises(ValueError, match=match):
        plan.check({**base, **block})


def test_library_tasks_use_their_own_cluster():
    assert plan.own_cluster(CFG, "base", "arithmetic") == ["arithmetic", "elementary_math_qa"]
    files = plan.library_files(CFG, "feedback", ["anagrams", "arithmetic"])
    assert [f.parent.parent.name for f in files] == ["feedback", "base"]


def test_run_key_changes_with_exactly_the_files_it_reads(tmp_path):
    lib = tmp_path / "lib"
    shutil.copytree(LIBRARY_DIR / "base", lib)
    cfg = plan.check({**{k: CFG[k] for k in ("models", "backend", "tasks", "methods")},
                      "library_versions": {"v": [str(lib)]}, "n_tasks": 2})
    job = plan.ArtJob("m", "arithmetic", "art", 0)
    files = plan.library_files(cfg, "v", plan.own_cluster(cfg, "v", "arithmetic"))
    key = plan.run_key(cfg, job, files)
    (lib / "reasoning/hyperbaton.txt").write_text("edited")          # not in this prompt
    assert plan.run_key(cfg, job, files) == key
    (lib / "arithmetic/elementary_math_qa.txt").write_text("edited")  # in this prompt
    assert plan.run_key(cfg, job, files) != key
    fewshot = plan.ArtJob("m", "arithmetic", "fewshot", 0)
    assert plan.run_key(cfg, fewshot, []) == plan.run_key(cfg, fewshot, [])


def test_versions_that_differ_only_in_demonstrations_share_a_selection():
    assert plan.selection_version(CFG, "feedback") == "base"
    assert plan.selection_inputs(CFG, "feedback") == plan.selection_inputs(CFG, "base")


def test_the_default_run_has_an_art_smoke_with_every_baseline():
    from retrace.config import load_experiment
    cfg = plan.check(load_experiment("smoke")["art"])
    assert set(cfg["methods"]) >= {"fewshot", "autocot", "art", "art_notools", "art_sc"}
    assert cfg["tasks"]["library"] and cfg["tasks"]["unseen"] and cfg["feedback"]["tasks"]
    assert cfg["models"] == ["qwen2.5-coder-0.5b-q4km"]
