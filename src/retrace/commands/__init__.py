"""The `retrace` commands, one module per group; each registers its commands with
`@command(...)` (below), and importing this package imports every module here (no central list).

- `use.py`: run, list, plan (the porcelain a user starts with);
- `inspect.py`: status, audit, export (reading and publishing a run);
- `steps.py`: model, data, generate, score, … report (the plumbing the workflow's rules call).
Method families add their own (`retrace drr …`, `retrace art …`) through retrace.config.families.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """A registered command: its one-line help, the examples its --help ends with, whether it
    is an internal step (the rules call it), and the builder that declares its arguments on its
    parser and returns the function that runs it (Namespace -> exit status)."""

    help: str
    examples: tuple[str, ...]
    step: bool
    build: Callable[[argparse.ArgumentParser], Callable[[argparse.Namespace], int | None]]


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, examples: tuple[str, ...] = (), step: bool = False) -> Callable:
    """Register a command (a duplicate name is an error, not a silent replacement)."""

    def register(build: Callable) -> Callable:
        if name in COMMANDS:
            raise ValueError(f"retrace command {name!r} is registered twice")
        COMMANDS[name] = Command(help, examples, step, build)
        return build

    return register


# Last: the modules register into COMMANDS above as they are imported.
for _info in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_info.name}")
