"""The `art:` block: checked keys, jobs, and rerun keys that hash exactly the library files used."""

import shutil

import pytest

from retrace.art import plan
from retrace.art.library import LIBRARY_DIR

CFG = plan.check(
    {
        "models": ["m"],
        "backend": "llamacpp",
        "library_versions": {"base": ["base"], "feedback": ["base", "feedback"]},
        "tasks": {"library": ["arithmetic"], "unseen": ["word_unscrambling"]},
        "methods": ["fewshot", "art", "art_sc"],
        "feedback": {"version": "feedback", "tasks": ["word_unscrambling"]},
        "n_tasks": 2,
    }
)


def test_jobs_cover_tasks_methods_and_the_edited_library():
    labels = {(j.task, j.label) for j in plan.jobs(CFG)}
    assert ("word_unscrambling", "art@feedback") in labels and ("arithmetic", "art@feedback") not in labels
    assert len(labels) == 2 * 3 + 1
    job = plan.ArtJob("m", "word_unscrambling", "art@feedback", 0)
    assert job.method == "art" and plan.job_version(CFG, job) == "feedback"


@pytest.mark.parametrize(
    "block, match",
    [
        ({"methods": ["art", "magic"]}, "unknown method 'magic'"),
        ({"tasks": {"unseen": ["nope"]}}, "unknown task 'nope'"),
        ({"tasks": {"library": ["word_unscrambling"]}}, "not a library task"),
        ({"colour": 1}, "unknown key"),
        ({"settings": {"max_stepz": 3}}, "max_stepz"),
        ({"feedback": {"version": "v9", "tasks": []}}, "v9"),
    ],
)
def test_bad_blocks_are_refused_by_name(block, match):
    base = {"models": ["m"], "backend": "llamacpp", "tasks": {"library": ["arithmetic"]}, "methods": ["art"]}
    with pytest.raises(ValueError, match=match):
        plan.check({**base, **block})


def test_library_tasks_use_their_own_cluster():
    assert plan.own_cluster(CFG, "base", "arithmetic") == ["arithmetic", "elementary_math_qa"]
    files = plan.library_files(CFG, "feedback", ["word_unscrambling", "arithmetic"])
    assert [f.parent.parent.name for f in files] == ["feedback", "base"]


def test_run_key_changes_with_exactly_the_files_it_reads(tmp_path):
    lib = tmp_path / "lib"
    shutil.copytree(LIBRARY_DIR / "base", lib)
    cfg = plan.check(
        {
            **{k: CFG[k] for k in ("models", "backend", "tasks", "methods")},
            "library_versions": {"v": [str(lib)]},
            "n_tasks": 2,
        }
    )
    job = plan.ArtJob("m", "arithmetic", "art", 0)
    files = plan.library_files(cfg, "v", plan.own_cluster(cfg, "v", "arithmetic"))
    key = plan.run_key(cfg, job, files)

    def edit(rel):  # a change to a program's steps, not to its input (inputs key the split)
        f = lib / rel
        f.write_text(f.read_text().replace("Q1:", "Q1:  ", 1))

    edit("reasoning/hyperbaton.txt")  # not in this prompt
    assert plan.run_key(cfg, job, files) == key
    edit("arithmetic/elementary_math_qa.txt")  # in this prompt
    assert plan.run_key(cfg, job, files) != key
    fewshot = plan.ArtJob("m", "arithmetic", "fewshot", 0)
    assert plan.run_key(cfg, fewshot, []) == plan.run_key(cfg, fewshot, [])


def test_a_simulated_blocks_keys_follow_its_planted_effects(tmp_path):
    """On the simulated engine (`retrace rehearse`) the effects decide the programs' answers:
    new effects, even in the same file, rerun the ART jobs; a llama.cpp block's keys gain
    nothing (its engine settings change speed, not programs)."""
    effects = tmp_path / "effects.yaml"
    job = plan.ArtJob("m", "arithmetic", "fewshot", 0)

    def key(points: int) -> str:
        effects.write_text(f"effects:\n  - {{label: art, points: {points}}}\n")
        sim = {**CFG, "backend": "simulated", "overrides": [f"backend.engine.effects={effects}"]}
        return plan.run_key(sim, job, [])

    assert key(10) == key(10) != key(20)
    assert "engine" not in plan.config_slice(CFG, job)
    deterministic = {**CFG, "overrides": ["backend.engine.deterministic=true"]}
    assert plan.config_slice(deterministic, job)["engine"] == {"deterministic": True}


def test_versions_that_differ_only_in_demonstrations_share_a_selection(tmp_path):
    edit = tmp_path / "edit" / "string_ops"
    edit.mkdir(parents=True)
    shutil.copy(LIBRARY_DIR / "base/string_ops/language_games.txt", edit)
    cfg = {**CFG, "library_versions": {"base": ["base"], "edit": ["base", str(tmp_path / "edit")]}}
    assert plan.selection_version(cfg, "edit") == "base"
    assert plan.selection_inputs(cfg, "edit") == plan.selection_inputs(cfg, "base")
    # the shipped feedback version adds a task to its own index: it selects on its own
    assert plan.selection_version(CFG, "feedback") == "feedback"
    assert plan.selection_inputs(CFG, "feedback")[0].parent.name == "feedback"


def test_the_leak_checks_inputs_are_the_library_files_they_read():
    """Every version's demonstrations (overlap.py), the main version's index and the task
    descriptions (unseen.py): rule inputs of `art_leakcheck` and its rerun key."""
    from retrace.art.library import EVAL_TASKS

    files = plan.leakcheck_inputs(CFG)
    assert EVAL_TASKS in files and LIBRARY_DIR / "base/index.yaml" in [f.resolve() for f in files]
    assert LIBRARY_DIR / "feedback/index.yaml" not in [f.resolve() for f in files]  # not the main version
    names = {f.name for f in files}
    assert {"kth_letter_concatenation.txt", "word_unscrambling.txt", "arithmetic.txt"} <= names


def test_the_default_run_has_an_art_smoke_with_every_baseline():
    from retrace.config.compose import load_experiment

    cfg = plan.check(load_experiment("smoke")["art"])
    assert set(cfg["methods"]) >= {"fewshot", "autocot", "art", "art_notools"}
    # the variants left out of the default (time budget, issue 14) run one command away
    assert set(plan.check(load_experiment("art_plumbing")["art"])["methods"]) == set(plan.METHODS)
    assert cfg["tasks"]["library"] and cfg["tasks"]["unseen"] and cfg["feedback"]["tasks"]
    assert cfg["models"] == ["qwen2.5-coder-0.5b-q4km"]


def _tool_cfg(tmp_path):
    coll = tmp_path / "passages.jsonl"
    coll.write_text('{"id": "a", "title": "A", "text": "Alpha."}\n')
    words = tmp_path / "words"
    words.write_text("cat\nact\n")
    block = {
        **{k: CFG[k] for k in ("models", "backend", "tasks", "methods", "library_versions")},
        "tools": {"search": {"collection": str(coll)}, "lookup": {"words": str(words)}},
    }
    return plan.check(block), coll, words


def test_editing_a_tools_data_changes_the_tool_using_jobs_keys_only(tmp_path):
    cfg, coll, words = _tool_cfg(tmp_path)
    assert {coll, words} <= set(plan.tool_data(cfg))
    art, notools = plan.ArtJob("m", "arithmetic", "art", 0), plan.ArtJob("m", "arithmetic", "art_notools", 0)
    files = plan.library_files(cfg, "base", plan.own_cluster(cfg, "base", "arithmetic"))
    before = {j: plan.run_key(cfg, j, files) for j in (art, notools)}
    coll.write_text('{"id": "a", "title": "A", "text": "Alpha, edited."}\n')
    mid = {j: plan.run_key(cfg, j, files) for j in (art, notools)}
    assert mid[art] != before[art] and mid[notools] == before[notools]
    words.write_text("cat\nact\ntac\n")
    assert plan.run_key(cfg, art, files) != mid[art] and plan.run_key(cfg, notools, files) == mid[notools]


def test_the_code_executors_engine_and_runtime_are_in_the_tool_using_jobs_keys_only(monkeypatch):
    from retrace.planning import closure
    from retrace.tools import wasm_exec

    art, notools = plan.ArtJob("m", "arithmetic", "art", 0), plan.ArtJob("m", "arithmetic", "art_notools", 0)
    before = {j: plan.run_key(CFG, j, []) for j in (art, notools)}
    select = plan.select_key({**CFG, "selection": "cluster"}, "word_unscrambling", "base")
    closure.sandbox_versions.cache_clear()
    real = closure.importlib.metadata.version
    other = lambda pkg: "0.0-other" if pkg == "wasmtime" else real(pkg)
    monkeypatch.setattr(closure.importlib.metadata, "version", other)  # another wasmtime
    try:
        assert closure.sandbox_versions("wasm")["wasmtime"] == "0.0-other"
        assert closure.sandbox_versions("wasm")["runtime_sha256"] == wasm_exec.RUNTIME_SHA256
        assert plan.run_key(CFG, art, []) != before[art]
        assert plan.select_key({**CFG, "selection": "cluster"}, "word_unscrambling", "base") != select
        monkeypatch.undo()
        closure.sandbox_versions.cache_clear()
        monkeypatch.setattr(wasm_exec, "RUNTIME_SHA256", "0" * 64)  # another runtime
        assert plan.run_key(CFG, art, []) != before[art]
    finally:
        closure.sandbox_versions.cache_clear()
        closure.engine_versions.cache_clear()
    assert plan.run_key(CFG, notools, []) == before[notools]


def test_the_default_word_list_is_the_pinned_pypi_file_and_in_the_key():
    from retrace.tools.lookup import PACKAGED

    cfg = plan.check({k: CFG[k] for k in ("models", "backend", "tasks", "methods", "library_versions")})
    data = plan.tool_data(cfg)
    assert any(p.name == "en.json.gz" and p.parent.parent.name == "spellchecker" for p in data)
    assert not any(str(p).startswith("/usr/share/dict") for p in data)
    assert PACKAGED["pyspellchecker:en"][3] in (plan.SRC.parents[1] / "envs/cpu.txt").read_text()


def test_a_newly_added_tool_module_is_hashed_tool_code(tmp_path, monkeypatch):
    tools = tmp_path / "tools"
    shutil.copytree(plan.TOOLS_DIR, tools, ignore=shutil.ignore_patterns("__pycache__", "collections"))
    monkeypatch.setattr(plan, "TOOLS_DIR", tools)
    job = plan.ArtJob("m", "arithmetic", "art", 0)
    key = plan.run_key(CFG, job, [])
    (tools / "calculator.py").write_text('"""A new tool."""\n')
    assert tools / "calculator.py" in plan.sources(job)
    assert plan.run_key(CFG, job, []) != key


def test_the_default_runs_art_prompts_demonstrate_every_tool():
    """Real programs can only call the tools their demonstrations show: the smoke's library
    tasks (own cluster) and the edited library must between them show all four."""
    from retrace.art.library import load_library
    from retrace.art.program import parse
    from retrace.config.compose import load_experiment
    from retrace.tools._interface import tool_name

    cfg = plan.check(load_experiment("smoke")["art"])
    shown = set()
    for task in cfg["tasks"]["library"]:
        lib = load_library(plan.version_dirs(cfg, "base"))
        for name in plan.own_cluster(cfg, "base", task):
            demos = lib.tasks[name].demos[: cfg["settings"]["demos_per_task"]]
            shown |= {tool_name(t) for d in demos for t in parse(d).tags()}
    # the feedback version's human-written task for the edited (unseen) task
    edited = load_library(plan.version_dirs(cfg, cfg["feedback"]["version"])).tasks["word_unscrambling"]
    shown |= {
        tool_name(t) for d in edited.demos[: cfg["settings"]["demos_per_task"]] for t in parse(d).tags()
    }
    assert {"search", "lookup", "code_generate", "code_execute"} <= shown


def test_art_paper_states_every_budget():
    from retrace.config.compose import load_experiment

    block = load_experiment("art_paper")["art"]
    assert set(block["settings"]) == set(plan.SETTINGS) | {"autocot_selection"}  # the paper's random AutoCoT
    assert (
        block["tools"]["code_execute"]["output_chars"]
        and block["tools"]["lookup"]["words"] == "pyspellchecker:en"
    )


def test_a_block_that_leaves_settings_out_is_sized_at_the_settings_its_jobs_run_with():
    from retrace.art.family import context_tokens

    raw = {k: v for k, v in CFG.items() if k != "settings"}  # as written: no settings key
    explicit = {**raw, "settings": dict(plan.check(raw)["settings"])}  # the defaults spelt out
    assert context_tokens(raw) == context_tokens(explicit)
    # a setting given is used: two more steps of the default segment length
    more = {**raw, "settings": {"max_steps": plan.SETTINGS["max_steps"] + 2}}
    assert context_tokens(more) - context_tokens(raw) == 2 * plan.SETTINGS["segment_tokens"]
