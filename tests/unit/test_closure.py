"""Rerun keys from the import closure (retrace.planning.closure): every stage's key changes when a module it
imports changes, and only then; a module a stage imports that its key misses fails a test."""

from __future__ import annotations

import importlib.metadata
import json
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from retrace.art import plan as art_plan
from retrace.art import summary as art_summary
from retrace.config.compose import load_experiment
from retrace.drr import settings as drr
from retrace.planning import closure, plan
from retrace.util import hashing

SRC_FILES = sorted(
    p for p in closure.SRC.joinpath("retrace").rglob("*") if p.is_file() and "__pycache__" not in p.parts
)


def spine_cases() -> list[tuple[str, dict]]:
    """(stage, job config) for every spine stage, one job per distinct method of `smoke`."""
    jobs = {j.method: j for j in plan.jobs({"experiment": "smoke"})}
    cases = []
    for stage in plan.STAGES:
        for j in (
            jobs.values() if stage in ("probe", "data", "generate", "score", "diagnose", "model") else [None]
        ):
            cases.append((stage, j.config() if j else {"claims": {}}))
    return cases


def drr_cases() -> list[tuple[str, dict]]:
    cfg = drr.load(load_experiment("smoke")["drr"])
    return [(f"drr.{s}", cfg) for s in drr.ENTRIES]


def key_of(stage: str, cfg: dict) -> str:
    plan._sources_hash.cache_clear()
    if stage.startswith("drr."):
        return drr.stage_key(stage[4:], cfg)
    return plan.rerun_key(stage, cfg)


@pytest.fixture
def edits(monkeypatch):
    """Hash files as if `edited` held a harmless edit (a new comment); record what is hashed."""
    real, state, memo = hashing.sha256_file, {"edited": None, "read": set()}, {}

    def fake(path):
        path = Path(path).resolve()
        state["read"].add(path)
        digest = memo[path] if path in memo else memo.setdefault(path, real(path))
        return hashing.sha256_text(digest + "# edited") if path == state["edited"] else digest

    monkeypatch.setattr(hashing, "sha256_file", fake)
    return state


@pytest.mark.parametrize(
    "stage,cfg", spine_cases() + drr_cases(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_a_key_changes_exactly_when_a_file_of_its_closure_changes(stage, cfg, edits):
    base = key_of(stage, cfg)
    covered = set(edits["read"])
    if stage.startswith("drr."):
        expected = {p.resolve() for p in drr.stage_files(stage[4:], cfg)}
    else:
        expected = {p.resolve() for p in plan.stage_sources(stage, cfg)}
        expected |= {p.resolve() for p in plan.templates(cfg)} if stage == "generate" else set()
    assert covered == expected  # the key reads the closure, nothing more, nothing less
    for f in sorted(expected):
        edits["edited"] = f
        assert key_of(stage, cfg) != base, f"editing {f} leaves the {stage} key unchanged"
    outside = [f for f in SRC_FILES if f.resolve() not in expected]
    for f in outside[:: max(1, len(outside) // 8)]:  # a sample; unread files cannot reach the key
        edits["edited"] = f.resolve()
        assert key_of(stage, cfg) == base, f"editing {f} changes the {stage} key"


def test_diagnose_and_claims_cover_the_statistics_they_import():
    """The holes issue 29 measured: diagnose runs scoring/stats.py, claims scoring/compute.py."""
    diag = {p.relative_to(plan.PKG).as_posix() for p in plan.stage_sources("diagnose", spine_cases()[0][1])}
    assert {
        "scoring/stats.py",
        "scoring/metrics.py",
        "store/data.py",
        "scoring/refine_diagnostics.py",
    } <= diag
    claims = {p.relative_to(plan.PKG).as_posix() for p in plan.stage_sources("claims")}
    assert {"scoring/compute.py", "scoring/stats.py", "scoring/claims.py"} <= claims


# The modules whose edits may rerun nothing, stated here and not read from closure.excluded() (a
# check derived from the list it checks cannot fail): each shapes records, keys, scheduling or
# messages, never an artifact's bytes. Adding a module to EXCLUDED means adding it here too,
# with the reason its edits cannot change an output.
MAY_RERUN_NOTHING = {
    "retrace.store.provenance",  # writes and audits .prov.json records
    "retrace.planning.plan",  # expands jobs, computes keys (the config slice it returns is hashed)
    "retrace.planning.closure",  # computes which code is hashed
    "retrace.config.compose",  # composes configs (the composed slice is hashed)
    "retrace.util.yamlfile",  # reads YAML for composition (the result is hashed)
    "retrace.util.registry",  # maps names to plugins (the plugins' code is hashed)
    "retrace.cli",  # argument parsing and dispatch
    "retrace.planning.cluster",  # resources for the scheduler
    "retrace.planning.estimate",  # the cost estimate printed before a run
    "retrace.util.progress",  # progress lines in logs
    "retrace.drr.settings",  # DRR's keys (retrace.planning.plan's role; the slices are hashed)
    # split out of the modules above when the families became plugins (issue 44):
    "retrace.config.groups",  # where config/ is and its groups' options (was retrace.config.compose's)
    "retrace.planning.devices",  # the GPUs a job asks the scheduler for (was retrace.planning.cluster's)
    "retrace.config.families",  # maps family names to their modules (retrace.util.registry's role, one level up)
}


def test_only_modules_that_shape_no_output_are_excluded():
    assert set(closure.excluded()) <= MAY_RERUN_NOTHING, set(closure.excluded()) - MAY_RERUN_NOTHING


def test_excluded_modules_rerun_nothing():
    for stage, cfg in spine_cases():
        names = {p.relative_to(plan.PKG).as_posix() for p in plan.stage_sources(stage, cfg)}
        assert not names & {"provenance.py", "plan.py", "cli.py", "closure.py"}, stage


def test_art_keys_follow_their_entries():
    cfg = art_plan.check(load_experiment("smoke")["art"])
    job = next(j for j in art_plan.jobs(cfg) if j.method == "art")
    files = {p.relative_to(art_plan.SRC).as_posix() for p in art_plan.sources(job)}
    assert {"art/runner.py", "art/program.lark", "tools/code_exec.py", "tools/wasm_exec.py"} <= files
    summary = {p.relative_to(art_plan.SRC).as_posix() for p in art_plan.code_files(art_summary.ENTRY)}
    assert {"art/summary.py", "scoring/stats.py"} <= summary


# Runtime check: what importing a stage really loads must be inside its closure. Modules loaded
# only through an excluded module (plan -> config) or by plugin discovery are allowed.
_PROBE = """
import importlib, json, os, sys
for heavy in ("numpy", "pandas", "jinja2", "yaml"):
    try:  # loaded once before forking, so each child imports only retrace's own modules
        importlib.import_module(heavy)
    except ImportError:
        pass
out = {}
for entry in sys.argv[1:]:
    r, w = os.pipe()
    if os.fork() == 0:
        before = set(sys.modules)
        importlib.import_module(entry)
        os.write(w, json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith("retrace"))).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out[entry] = json.loads(f.read())
    os.wait()
print(json.dumps(out))
"""
ENTRIES = [f"retrace.stages.{s}" for s in plan.STAGES] + ["retrace.drr.stages", "retrace.art.stages"]


@pytest.fixture(scope="module")
def loaded_by_entry() -> dict[str, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *ENTRIES],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(closure.SRC)},
    )
    return json.loads(proc.stdout)


@pytest.mark.parametrize("entry", ENTRIES)
def test_every_module_a_stage_imports_is_in_its_closure(entry, loaded_by_entry):
    loaded = set(loaded_by_entry[entry])
    allowed = set(closure.modules((entry,))) | MAY_RERUN_NOTHING
    allowed |= set(closure.modules(tuple(sorted(MAY_RERUN_NOTHING)), exclude=False))  # what they import
    assert not loaded - allowed, f"{entry} imports modules its key misses: {loaded - allowed}"


# ---- the analyser itself, on a small synthetic package


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = tmp_path / "retrace" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return tmp_path


def test_imports_inside_functions_by_string_and_relative_are_followed(tmp_path):
    root = tree(
        tmp_path,
        {
            "__init__.py": "",
            "stage.py": "from . import a\ndef f():\n    from retrace.pkg import b\n",
            "a.py": "X = 'retrace.c:Thing'\n",
            "pkg/__init__.py": "",
            "pkg/b.py": "from .d import y\n",
            "pkg/d.py": "",
            "c.py": "",
            "unused.py": "",
        },
    )
    mods = closure.modules(("retrace.stage",), root)
    assert set(mods) == {
        "retrace",
        "retrace.stage",
        "retrace.a",
        "retrace.pkg",
        "retrace.pkg.b",
        "retrace.pkg.d",
        "retrace.c",
    }


def test_a_function_entry_follows_only_what_it_uses(tmp_path):
    root = tree(
        tmp_path,
        {
            "__init__.py": "",
            "stages.py": (
                "from retrace import a, b\n"
                "def one(train):\n    return helper(train)\n"
                "def helper(x):\n    return a.f(x)\n"
                "def train():\n    return b.g()\n"
            ),
            "a.py": "",
            "b.py": "",
        },
    )
    assert set(closure.modules(("retrace.stages:one",), root)) == {"retrace", "retrace.stages", "retrace.a"}
    assert set(closure.modules(("retrace.stages:train",), root)) == {"retrace", "retrace.stages", "retrace.b"}


def test_an_unresolvable_import_or_missing_data_file_is_an_error(tmp_path):
    root = tree(tmp_path, {"__init__.py": "", "s.py": "def f():\n    import retrace.gone\n"})
    with pytest.raises(closure.ClosureError, match=r"s\.py:2: imports 'retrace\.gone'"):
        closure.modules(("retrace.s",), root)
    tree(tmp_path, {"report/__init__.py": "", "report/html.py": ""})  # but no templates/
    with pytest.raises(closure.ClosureError, match="declares data file"):
        closure.data_files(["retrace.report.html"], tmp_path)


def test_engine_versions_name_the_packages_and_refuse_unknown_backends():
    assert set(closure.engine_versions("llamacpp")) == {"xllamacpp"}
    with pytest.raises(closure.ClosureError, match="ENGINE_PACKAGES"):
        closure.engine_versions("no-such-engine")


def test_the_fast_scan_finds_what_the_parser_finds_in_every_module():
    """Planning reads imports with patterns (closure._scan); `ast` is the reference."""
    import ast

    for path in sorted(closure.SRC.joinpath("retrace").rglob("*.py")):
        rel = path.relative_to(closure.SRC).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        text = path.read_text()
        parsed = {m for m, _ in closure._imports_of(ast.parse(text), name, path, closure.SRC)}
        scanned = {m for m, _ in closure._scan(text, name, path, closure.SRC)}
        assert parsed <= scanned, f"{path}: the scan misses {parsed - scanned}"
        extra = {m for m in scanned - parsed if closure.module_file(m) is None}
        assert not extra, f"{path}: the scan invents {extra}"


def test_an_edit_to_the_statistics_replans_no_art_or_drr_engine_job_of_the_default_run():
    """scoring/stats.py computes the claims' statistics; no ART program run or selection and no
    DRR stage but the summary computes one, so their keys must not follow the file (issue 44:
    once, every ART run hashed it through art.plan naming the summary's entry). The summaries
    do compute statistics: their keys follow it."""
    from retrace.config.compose import check_global
    from retrace.drr import settings as drr_settings

    stats = closure.SRC / "retrace" / "scoring" / "stats.py"
    exp = load_experiment(check_global({})["experiment"])  # the default run (config/config.yaml)
    art, drr = art_plan.check(exp["art"]), drr_settings.load(exp["drr"])
    engine_jobs = [art_plan.sources(j) for j in art_plan.jobs(art)] + [art_plan.sources()]
    engine_jobs += [drr_settings.stage_files(s, drr) for s in drr_settings.ENTRIES if s != "summarise"]
    assert engine_jobs and all(stats not in files for files in engine_jobs)
    assert stats in art_plan.code_files(art_summary.ENTRY)
    assert stats in drr_settings.stage_files("summarise", drr)


def test_a_function_entry_follows_its_own_imports_aliases_and_callees(tmp_path):
    """What `one` runs: an import inside it, a module named by string, a module-level
    `import ... as` alias it uses, and a helper reached after a call cycle; the entry module's
    parent packages too. `other` and its import are not followed."""
    root = tree(
        tmp_path,
        {
            "__init__.py": "",
            "pkg/__init__.py": "",
            "pkg/stages.py": (
                "import retrace.alias as al\nimport retrace.dotted\n"
                "def one():\n    from retrace import inner\n    X = 'retrace.named:Thing'\n"
                "    return al.f(), retrace.dotted.g(), later(), cycle()\n"
                "def cycle():\n    return one()\n"
                "def later():\n    import retrace.late\n"
                "def other():\n    import retrace.unused\n"
            ),
            "alias.py": "",
            "dotted.py": "",
            "inner.py": "",
            "named.py": "",
            "late.py": "",
            "unused.py": "",
        },
    )
    assert set(closure.modules(("retrace.pkg.stages:one",), root)) == {
        "retrace",
        "retrace.pkg",
        "retrace.pkg.stages",
        "retrace.alias",
        "retrace.dotted",
        "retrace.inner",
        "retrace.named",
        "retrace.late",
    }


def test_relative_imports_two_levels_up_resolve(tmp_path):
    root = tree(
        tmp_path,
        {
            "__init__.py": "",
            "top.py": "",
            "a/__init__.py": "",
            "a/b/__init__.py": "",
            "a/b/c.py": "from ..d import x\nfrom ... import top\n",
            "a/d.py": "",
        },
    )
    assert {"retrace.a.d", "retrace.top"} <= set(closure.modules(("retrace.a.b.c",), root))


def test_the_fast_scan_names_the_same_lines_as_the_parser():
    """Import lines point a ClosureError at file:line: the scan's lines are the parser's."""
    import ast

    for path in sorted(closure.SRC.joinpath("retrace").rglob("*.py")):
        rel = path.relative_to(closure.SRC).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        text = path.read_text()
        parsed = set(closure._imports_of(ast.parse(text), name, path, closure.SRC))
        scanned = set(closure._scan(text, name, path, closure.SRC))
        assert parsed <= scanned, f"{path}: {sorted(parsed - scanned)[:3]}"


def test_a_plugin_package_is_named_by_its_folder():
    assert closure.plugin_modules([closure.SRC / "retrace" / "tasks" / "__init__.py"]) == ["retrace.tasks"]
    assert closure.plugin_modules([closure.SRC / "retrace" / "tasks" / "gsm8k.py"]) == ["retrace.tasks.gsm8k"]


def test_the_wasm_sandbox_key_carries_its_runtime_digest_and_bwrap_none():
    from retrace.tools.wasm_exec import RUNTIME_SHA256

    assert closure.sandbox_versions("wasm")["runtime_sha256"] == RUNTIME_SHA256
    assert "runtime_sha256" not in closure.sandbox_versions("bwrap")
    # the executor is named, and bwrap's host Python (issue 54: the two are different Pythons)
    assert closure.sandbox_versions("wasm")["executor"] == "wasm"
    assert closure.sandbox_versions("bwrap")["python"] == platform.python_version()


def test_a_function_entry_follows_the_imports_its_modules_top_level_statements_use(tmp_path):
    """A module-level statement runs on import, so what it uses is part of every function of
    that module: `TABLE = tables.build()` makes `retrace.tables` part of `one`'s closure, while
    `import retrace.idle` that no statement or function uses is not."""
    root = tree(
        tmp_path,
        {
            "__init__.py": "",
            "stages.py": (
                "import retrace.tables as tables\nimport retrace.idle as idle\n"
                "TABLE = tables.build()\n"
                "def one():\n    return 1\n"
            ),
            "tables.py": "",
            "idle.py": "",
        },
    )
    assert set(closure.modules(("retrace.stages:one",), root)) == {
        "retrace",
        "retrace.stages",
        "retrace.tables",
    }


def test_an_absent_engine_package_keys_as_none_and_an_installed_one_as_its_version(monkeypatch):
    # a key computed where a backend's package is not installed (a plan on a login node without
    # vLLM) names it as absent rather than failing the plan
    monkeypatch.setitem(closure.ENGINE_PACKAGES, "toy", ("retrace-no-such-package", "pyyaml"))
    found = closure.engine_versions("toy")
    assert found["retrace-no-such-package"] is None
    assert found["pyyaml"] == importlib.metadata.version("pyyaml")
