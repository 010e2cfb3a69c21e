"""Name → plugin registries (methods, backends, tasks, tools; the method families' in
retrace.config.families).

A plugin module registers itself at import time with `@REGISTRY.register("name")`.
Plugins are discovered by importing every module of their package, so adding a
plugin means adding one file; no central list is edited. Heavy imports (torch,
vllm) must stay inside the plugin's functions so discovery stays cheap.

Each registry checks the shape of what it registers (its `Shape`: a method is a function of
(problems, cfg, llm, ctx), a backend a subclass of Backend, a task an instance of Task, a tool a
subclass of Tool) and refuses anything else in one line naming the plugin's file and name; it
also records where each plugin is defined (`where`, shown by `retrace list plugins`).
The base classes are named as "module:Name" and resolved at the first check, so this bottom
layer imports nothing above it (docs/development/architecture.md).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from retrace.util.records import Problem

T = TypeVar("T")


class RegistryError(KeyError, ValueError):
    """An unknown or duplicate plugin name, or a plugin of the wrong shape (a ValueError too, so
    the command line prints it as one line, not a traceback)."""

    def __str__(self) -> str:  # KeyError repr-quotes its message; we want it readable
        return str(self.args[0])


class Method(Protocol):
    """A method plugin: one row per problem (retrace.methods.base.row); `cfg` is the job's
    retrace.config.settings.MethodSettings (typed Any here: it lives in a layer above)."""

    def __call__(self, problems: list[Problem], cfg: Any, llm: Any, ctx: Any) -> list[dict]: ...


def _resolve(ref: str) -> type:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Shape:
    """What a registry accepts: `words` say it in an error, `test` checks one plugin."""

    words: str
    test: Callable[[Any], bool]


def subclass_of(ref: str) -> Shape:
    """Classes derived from the class `ref` ("module:Name")."""
    return Shape(f"a subclass of {ref}", lambda obj: inspect.isclass(obj) and issubclass(obj, _resolve(ref)))


def instance_of(ref: str) -> Shape:
    """Instances of the class `ref` ("module:Name")."""
    return Shape(f"an instance of {ref}", lambda obj: isinstance(obj, _resolve(ref)))


def function_of(*params: str) -> Shape:
    """Functions callable with these positional parameters (by position: names are free)."""

    def test(obj: Any) -> bool:
        if not inspect.isfunction(obj):
            return False
        try:
            inspect.signature(obj).bind(*params)
        except TypeError:
            return False
        return True

    return Shape(f"a function of ({', '.join(params)})", test)


def defined_at(obj: Any) -> str:
    """`path:line` of the function or class behind a plugin (an instance: its class); the
    path is relative to the folder holding the retrace package when it lies inside it."""
    target = obj if inspect.isfunction(obj) or inspect.isclass(obj) else type(obj)
    try:
        path, line = inspect.getsourcefile(target) or "?", inspect.getsourcelines(target)[1]
    except (OSError, TypeError):  # defined in a REPL or an extension module
        return "<unknown>"
    file, root = Path(path).resolve(), Path(__file__).resolve().parents[2]
    return f"{file.relative_to(root) if file.is_relative_to(root) else file}:{line}"


def described(obj: Any) -> str:
    """A plugin in a few words: `function run(problems, cfg)`, `class Search`, `Task instance`."""
    if inspect.isfunction(obj):
        return f"function {obj.__qualname__}{inspect.signature(obj)}"
    return f"class {obj.__qualname__}" if inspect.isclass(obj) else f"{type(obj).__qualname__} instance"


class Registry(Generic[T]):
    """A registry of plugins of one kind, filled by importing the package `package`; each
    plugin registered must have the registry's `shape` (None: anything)."""

    def __init__(self, kind: str, package: str, shape: Shape | None = None):
        self.kind, self.package, self.shape = kind, package, shape
        self._items: dict[str, T] = {}
        self._discovered = False

    def register(self, name: str) -> Callable[[Any], Any]:
        def decorator(obj: Any) -> Any:
            if name in self._items and self._items[name] is not obj:
                # lm-eval silently keeps the first of two same-named tasks; we refuse.
                raise RegistryError(
                    f"duplicate {self.kind} name {name!r}: {defined_at(self._items[name])} and {defined_at(obj)}"
                )
            if self.shape is not None and not self.shape.test(obj):
                raise RegistryError(
                    f"{defined_at(obj)}: {self.kind} {name!r} must be {self.shape.words}, got {described(obj)}"
                )
            self._items[name] = obj
            return obj

        return decorator

    def _discover(self) -> None:
        if self._discovered:
            return
        pkg = importlib.import_module(self.package)
        for info in pkgutil.iter_modules(pkg.__path__):
            if not info.name.startswith("_"):
                importlib.import_module(f"{self.package}.{info.name}")
        self._discovered = True

    def get(self, name: str) -> T:
        self._discover()
        if name not in self._items:
            raise RegistryError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        return self._items[name]

    def names(self) -> list[str]:
        self._discover()
        return sorted(self._items)

    def where(self, name: str) -> str:
        """`path:line` where plugin `name` is defined (`retrace list plugins`)."""
        return defined_at(self.get(name))

    def module_files(self, name: str) -> list[str]:
        """Source files of plugin `name` and of its retrace base classes (hashed for reruns)."""
        obj = self.get(name)
        if inspect.isfunction(obj) or inspect.ismodule(obj):
            return [str(inspect.getsourcefile(obj))]
        cls = obj if inspect.isclass(obj) else type(obj)  # tasks register instances
        return sorted(
            {str(inspect.getsourcefile(c)) for c in cls.__mro__ if c.__module__.startswith("retrace.")}
        )


METHODS: Registry[Method] = Registry(
    "method", "retrace.methods", function_of("problems", "cfg", "llm", "ctx")
)
# Backends and tasks are typed Any here: their base classes live in layers above this one.
BACKENDS: Registry[Any] = Registry(
    "backend", "retrace.backends", subclass_of("retrace.backends.base:Backend")
)
TASKS: Registry[Any] = Registry("task", "retrace.tasks", instance_of("retrace.tasks.base:Task"))
