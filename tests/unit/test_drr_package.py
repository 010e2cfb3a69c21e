"""DRR lives in one package, src/retrace/drr/, whose modules import each other without a
circle (imports inside functions count: they run too), and whose stages' rerun keys cover
the modules each stage runs (retrace.planning.closure)."""

from __future__ import annotations

import ast

from retrace.drr import settings
from retrace.planning import closure

SRC = closure.SRC / "retrace"


def drr_graph() -> dict[str, set[str]]:
    """Module -> the drr modules it imports, at module level or inside a function (a string
    naming a module, such as settings.ENTRIES, is a reference for rerun keys, not an import)."""
    mods = sorted(f"retrace.drr.{p.stem}" for p in (SRC / "drr").glob("*.py") if p.stem != "__init__")
    graph = {}
    for m in mods:
        found = set()
        for node in ast.walk(ast.parse(closure.module_file(m).read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        graph[m] = {x for x in found if x in mods and x != m}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of `graph` (module names, closed), or [] when there is none."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = "open"
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                return path[path.index(n) :] + [n]
            if n not in state and (found := visit(n)):
                return found
        state[m] = "done"
        path.pop()
        return []

    for m in graph:
        if m not in state and (found := visit(m)):
            return found
    return []


def test_drr_is_one_package():
    assert not (SRC / "discriminator").exists() and not (SRC / "scoring" / "drr_metrics.py").exists()
    for name in ("dm_data", "loop", "leak", "metrics", "claims", "prompts", "episodes", "report"):
        assert (SRC / "drr" / f"{name}.py").is_file(), name


def test_no_import_circle_within_drr():
    graph = drr_graph()
    assert graph["retrace.drr.episodes"] and graph["retrace.drr.report"]  # the graph is read
    assert cycle(graph) == [], " -> ".join(cycle(graph))


def test_the_circle_finder_finds_one():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) == []


def test_each_stage_key_covers_the_drr_modules_it_runs():
    names = lambda stage: {p.name for p in settings.stage_files(stage) if p.parent.name == "drr"}
    assert {"loop.py", "prompts.py", "reasoner.py"} <= names("distil")
    assert {"dm_data.py"} <= names("split")
    assert {"dm.py", "dm_data.py"} <= names("train")
    assert {"metrics.py", "loop.py", "episodes.py"} <= names("infer")
    assert {"leak.py", "leak_text.py", "prompts.py", "dm_data.py"} <= names("leakcheck")
    assert {"claims.py", "metrics.py", "leakcheck.py", "episodes.py"} <= names("summarise")
