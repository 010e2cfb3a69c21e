"""The import-shape check of `make lint` (.ci/import_shape.py) on small made-up graphs: it must
find a cycle of any length, a loop between packages that no single module closes, a top-level
module in no layer, leave a package's imports of its own submodules alone, and name an import
of a method family from the core or from another family. (Imports inside functions are edges
of grimp's graph like any other; the graphs here stand for it.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "import_shape.py"


@pytest.fixture(scope="module")
def shape():
    spec = importlib.util.spec_from_file_location("import_shape", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Graph:
    """The two calls of grimp.ImportGraph the check makes."""

    def __init__(self, imports: dict[str, set[str]]):
        self.imports = imports
        self.modules = set(imports) | {m for ms in imports.values() for m in ms}

    def find_modules_directly_imported_by(self, module: str) -> set[str]:
        return self.imports.get(module, set())


def test_a_cycle_of_any_length_is_found_and_named(shape):
    graph = Graph({"r.a": {"r.b"}, "r.b": {"r.c"}, "r.c": {"r.a"}, "r.d": {"r.a"}})
    (line,) = shape.problems(graph, [])
    assert line.startswith("import cycle of 3 modules:") and "r.c -> r.a" in line
    assert shape.problems(Graph({"r.a": {"r.b"}, "r.b": {"r.c"}}), []) == []


def test_a_package_importing_its_own_submodules_is_no_cycle(shape):
    assert shape.problems(Graph({"r.report": {"r.report.html"}, "r.report.html": {"r.report"}}), []) == []


def test_the_core_and_other_families_must_not_import_a_family(shape):
    graph = Graph(
        {
            "r.cluster": {"r.drr.settings"},
            "r.drr.stages": {"r.drr.settings", "r.art.plan", "r.cluster"},
            "r.art.family": {"r.family"},
        }
    )
    assert shape.problems(graph, ["r.art", "r.drr"]) == [
        "import loop between 2 packages r.cluster, r.drr: r.cluster -> r.drr.settings; r.drr.stages -> r.cluster",
        "r.cluster imports r.drr.settings: the core must not import family r.drr",
        "r.drr.stages imports r.art.plan: family r.drr must not import family r.art",
    ]


def test_the_families_are_found_by_their_family_module(shape):
    assert {"retrace.art", "retrace.drr"} <= set(shape.families())


def test_a_loop_between_packages_through_different_modules_is_found_and_named(shape):
    # no module imports itself back, yet stages -> planning -> stages: the layers loop
    graph = Graph(
        {
            "retrace.stages.generate": {"retrace.planning.plan"},
            "retrace.planning.cells": {"retrace.stages.claims"},
            "retrace.stages.claims": {"retrace.util.atomic"},
        }
    )
    (line,) = shape.problems(graph, [])
    assert line.startswith("import loop between 2 packages retrace.planning, retrace.stages:")
    assert "retrace.planning.cells -> retrace.stages.claims" in line
    assert "retrace.stages.generate -> retrace.planning.plan" in line
    one_way = Graph(
        {"retrace.stages.generate": {"retrace.planning.plan"}, "retrace.cli": {"retrace.stages.x"}}
    )
    assert shape.problems(one_way, []) == []


def test_a_top_level_module_in_no_layer_is_named(shape):
    graph = Graph({"retrace.cli": {"retrace.newthing.x"}, "retrace.newthing.x": set()})
    assert shape.problems(graph, [], layers={"retrace.cli"}) == [
        "retrace.newthing is in no layer: add it to the layers contract in pyproject.toml"
    ]
    assert shape.problems(graph, [], layers={"retrace.cli", "retrace.newthing"}) == []


def test_every_top_level_package_and_module_of_the_tree_is_in_a_layer(shape):
    src = shape.SRC
    tops = {f"retrace.{p.stem}" for p in src.glob("*.py") if p.stem != "__init__"}
    tops |= {f"retrace.{p.parent.name}" for p in src.glob("*/__init__.py")}
    assert {"retrace.cli", "retrace.util", "retrace.stages", "retrace.drr"} <= tops
    assert shape.unlayered(tops, shape.layered()) == []
    assert {"retrace.util", "retrace.store", "retrace.config", "retrace.engine"} <= shape.layered()
