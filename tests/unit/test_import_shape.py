"""The import-shape check of `make lint` (.ci/import_shape.py) on small made-up graphs: it must
find a cycle of any length, leave a package's imports of its own submodules alone, and name an
import of a method family from the core or from another family."""

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
        "r.cluster imports r.drr.settings: the core must not import family r.drr",
        "r.drr.stages imports r.art.plan: family r.drr must not import family r.art",
    ]


def test_the_families_are_found_by_their_family_module(shape):
    assert {"retrace.art", "retrace.drr"} <= set(shape.families())
