"""Name → plugin registries (methods, backends, tasks, tools).

A plugin module registers itself at import time with `@REGISTRY.register("name")`.
Plugins are discovered by importing every module of their package, so adding a
plugin means adding one file; no central list is edited. Heavy imports (torch,
vllm) must stay inside the plugin's functions so discovery stays cheap.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any


class RegistryError(KeyError):
    """An unknown or duplicate plugin name."""

    def __str__(self) -> str:  # KeyError repr-quotes its message; we want it readable
        return str(self.args[0])


class Registry:
    """A registry of plugins of one kind, filled by importing the package `package`."""

    def __init__(self, kind: str, package: str):
        self.kind, self.package = kind, package
        self._items: dict[str, Any] = {}
        self._discovered = False

    def register(self, name: str) -> Callable[[Any], Any]:
        def decorator(obj: Any) -> Any:
            if name in self._items and self._items[name] is not obj:
                # lm-eval silently keeps the first of two same-named tasks; we refuse.
                raise RegistryError(f"duplicate {self.kind} name {name!r}: {self._items[name]!r} and {obj!r}")
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

    def get(self, name: str) -> Any:
        self._discover()
        if name not in self._items:
            raise RegistryError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        return self._items[name]

    def names(self) -> list[str]:
        self._discover()
        return sorted(self._items)

    def module_files(self, name: str) -> list[str]:
        """Source files of plugin `name` and of its retrace base classes (hashed for reruns)."""
        import inspect

        obj = self.get(name)
        if inspect.isfunction(obj) or inspect.ismodule(obj):
            return [str(inspect.getsourcefile(obj))]
        cls = obj if inspect.isclass(obj) else type(obj)  # tasks register instances
        return sorted(
            {str(inspect.getsourcefile(c)) for c in cls.__mro__ if c.__module__.startswith("retrace.")}
        )


METHODS = Registry("method", "retrace.methods")
BACKENDS = Registry("backend", "retrace.backends")
TASKS = Registry("task", "retrace.tasks")
