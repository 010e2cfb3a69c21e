"""The plugin registries (retrace.util.registry): each checks the shape of what it registers and
refuses anything else in one line naming the plugin's file and name; each records where a
plugin is defined, which `retrace list plugins` shows."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from retrace.app import catalog
from retrace.backends.base import Backend
from retrace.config.families import FAMILIES
from retrace.tasks.base import Task
from retrace.tools import TOOLS
from retrace.util.registry import BACKENDS, METHODS, TASKS, Registry, RegistryError

HERE = Path(__file__).name


def fresh(real: Registry) -> Registry:
    """An empty registry with the shape of a real one (the real ones stay untouched)."""
    return Registry(real.kind, real.package, real.shape)


def two_arguments(problems, cfg):
    return []


def four_arguments(problems, cfg, llm, ctx):
    return []


class NotABackend:
    pass


class ABackend(Backend):
    pass


def line_of(obj) -> int:
    return inspect.getsourcelines(obj)[1]


def test_a_method_of_the_wrong_shape_is_refused_naming_its_file_line_and_name():
    methods = fresh(METHODS)
    with pytest.raises(RegistryError) as e:
        methods.register("halfway")(two_arguments)
    text = str(e.value)
    assert text == (
        f"{Path(__file__).resolve()}:{line_of(two_arguments)}: method 'halfway' must be a function of "
        "(problems, cfg, llm, ctx), got function two_arguments(problems, cfg)"
    )
    assert methods.register("whole")(four_arguments) is four_arguments
    with pytest.raises(RegistryError, match="must be a function"):
        methods.register("a_class")(NotABackend)


def test_backends_tasks_and_tools_must_derive_from_their_base():
    backends, tasks, tools = fresh(BACKENDS), fresh(TASKS), fresh(TOOLS)
    with pytest.raises(
        RegistryError,
        match=rf"{HERE}:\d+: backend 'nope' must be a subclass of retrace.backends.base:Backend",
    ):
        backends.register("nope")(NotABackend)
    backends.register("fine")(ABackend)
    with pytest.raises(RegistryError, match="task 'cls' must be an instance of retrace.tasks.base:Task"):
        tasks.register("cls")(Task)  # the class, where a task registers an instance
    tasks.register("instance")(Task())
    with pytest.raises(
        RegistryError, match="tool 'backend' must be a subclass of retrace.tools._interface:Tool"
    ):
        tools.register("backend")(ABackend)


def test_a_family_that_is_no_family_class_is_refused_before_it_is_built():
    built = []

    class Imposter:
        def __init__(self):
            built.append(self)

    with pytest.raises(RegistryError, match=rf"{HERE}:\d+: method family 'imposter' must be a subclass of"):
        FAMILIES.register("imposter")(Imposter)
    assert built == [] and "imposter" not in FAMILIES.names()


def test_a_duplicate_name_names_both_definitions():
    methods = fresh(METHODS)
    methods.register("same")(four_arguments)

    def other(problems, cfg, llm, ctx):
        return []

    with pytest.raises(RegistryError, match=rf"duplicate method name 'same': .*{HERE}:\d+ and .*{HERE}:\d+"):
        methods.register("same")(other)


def test_every_real_plugin_has_its_shape_and_is_listed_where_it_is_defined():
    entries = dict(catalog.plugin_entries())
    src = Path(__file__).resolve().parents[2] / "src"
    for registry in (METHODS, BACKENDS, TASKS, TOOLS, FAMILIES):
        assert registry.names()
        for name in registry.names():
            where = entries[f"{registry.kind} {name}"]
            path, line = where.rsplit(":", 1)
            assert (src / path).is_file() and int(line) > 0, where
    assert entries["method greedy"].startswith("retrace/methods/greedy.py:")
    assert entries["backend simulated"].startswith("retrace/backends/simulated.py:")
    assert isinstance(TASKS.get("gsm8k"), Task) and issubclass(BACKENDS.get("scripted"), Backend)


def test_retrace_list_plugins_prints_them_and_the_bare_list_leaves_them_out(capsys):
    from retrace.cli import main

    assert main(["list", "plugins"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plugins:") and "method greedy" in out and "retrace/methods/greedy.py:" in out
    assert main(["list"]) == 0
    assert "plugins:" not in capsys.readouterr().out


def test_the_command_line_prints_a_wrong_plugin_as_one_line(capsys, monkeypatch):
    from retrace import cli
    from retrace.app import catalog as cat

    def broken():
        fresh(METHODS).register("halfway")(two_arguments)

    monkeypatch.setattr(cat, "plugin_entries", broken)
    assert cli.main(["list", "plugins"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"{HERE}:{line_of(two_arguments)}: method 'halfway' must be a function" in line
