"""Method families as plugins: the core iterates over them, each family registers itself.

A method family (the sampling spine with refinement, DRR, ART, a fourth one later) is one
package with a `family` module that registers a `Family` subclass instance:

    from retrace.config.families import FAMILIES, Family

    @FAMILIES.register("toy")
    class Toy(Family):
        block = "toy"                      # the experiment key whose block it reads
        def estimate_lines(self, ctx): ...

The core (plan, cluster, estimate, preflight, cli, catalog, closure, the claims stage) asks
every registered family for its part — jobs, cost bounds, runtimes, plan checks, claim names,
report sections, CLI subcommands, rerun-key inputs — and never imports a family by name
(docs/development/style.md, "The shape of the house").
Families are found by a scan: every subpackage of `retrace` with a `family` module, then the
`retrace.config.families` entry points of other installed distributions (their pyproject.toml
`[project.entry-points."retrace.config.families"]`), then
whatever a test registers by hand. They run in `order`, then by name, so their lines come
out in a stable order. Layer contracts in pyproject.toml ([tool.importlinter]) keep the core
from importing a family, and the families from importing each other.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrace.util.registry import Registry, RegistryError, defined_at, described, instance_of


@dataclass(frozen=True)
class Context:
    """What a family hook may read: the global config (config/config.yaml with overrides), the
    composed experiment file, the benchmark mirror, the probe results directory and the time
    limit jobs are sized against."""

    global_cfg: dict = field(hash=False)
    experiment: dict = field(hash=False)
    mirror: str | None = None
    probe_dir: Path | None = None
    limit: Any = None  # retrace.planning.cluster.Limit the jobs are sized against (None: no limit)

    def block(self, family: Family) -> Any:
        """The experiment's block of `family` (None: absent, or the family reads no block),
        read-only (retrace.util.frozen): every family hook reads the same experiment."""
        from retrace.util.frozen import freeze

        return freeze(self.experiment.get(family.block)) if family.block else None


@dataclass(frozen=True)
class Rehearsal:
    """A rehearsal (`retrace rehearse --workflow`): the planted effects file, the scale of the
    datasets, and the rehearsal's own copy of config/."""

    effects: Path
    scale: float
    config_dir: Path


class Family:
    """What a method family gives the core; every hook defaults to nothing.

    A hook that reads the family's experiment block runs only when the block is present
    (`active`); a family without a `block` (the spine) is always active."""

    name = ""  # set by FAMILIES.register
    block: str | None = None  # the experiment key of the family's block ("drr", "art")
    order = 50  # where its lines come in `retrace plan` and `--check` output (lower first)
    summary = ""  # one line for `retrace list methods`, before the names `methods()` gives

    def active(self, ctx: Context) -> bool:
        return self.block is None or bool(ctx.block(self))

    def methods(self) -> tuple[str, ...]:
        """The methods an experiment's block may name (`retrace list methods`)."""
        return ()

    def estimate_lines(self, ctx: Context) -> list[str]:
        """The cost estimate's lines (`retrace plan`, retrace.planning.estimate)."""
        return []

    def runtimes(self, ctx: Context) -> list:
        """Every job's estimated runtime as retrace.planning.cluster.OverLimit records."""
        return []

    def config_checks(self, ctx: Context) -> list[tuple[str, str]]:
        """(where, why) of what would fail, from the configuration alone (`retrace plan --check`)."""
        return []

    def hub_artifacts(self, ctx: Context) -> list[tuple[str, str]]:
        """(repo, pinned revision) of what the family's GPU jobs load from the hub besides the
        policy models, materialised before them by a local rule (retrace.app.hub_artifacts)."""
        return []

    def pilot_roles(self, ctx: Context) -> list[dict]:
        """The family's own engine roles for `retrace pilot` (retrace.app.pilot_roles): one dict
        each, {model, backend, overrides, role, context, max_tokens}, at its longest request."""
        return []

    def data_checks(self, ctx: Context, notes: list[str]) -> list[tuple[str, str]]:
        """(where, why) of what would fail, read from the data (run after every config check);
        what was checked and passed goes to `notes`."""
        return []

    def resolved_jobs(self, block: Any, config_dir: Path) -> dict[str, Any]:
        """Job name -> the config its stages read, for the block with defaults from `config_dir`
        (retrace.deviations.effect: a register switch must change one of them)."""
        return {}

    def claim_names(self) -> set[str]:
        """Every claim of this family an experiment's claims.primary may name."""
        return set()

    def claims_design(self, block: Any, mirror: str, design: Any) -> None:
        """Add the block's cells and claim rows to `design` (retrace.scoring.design.Design)."""

    def rehearsal_note(self) -> str:
        """What a rehearsal runs simulated in this family, one line."""
        return ""

    def rehearsal_datasets(self, block: Any) -> tuple[set[str], set[str]]:
        """(datasets a rehearsal scales down, datasets it keeps whole) of the block."""
        return set(), set()

    def rehearsal_block(self, block: Any, rehearsal: Rehearsal) -> Any:
        """The block on the simulated engine; effects it cannot plant are refused (ValueError)."""
        return block

    def planted_truths(
        self, rows: list[dict], truths: list[float], effects: list[dict], config_dir: Path
    ) -> list[float]:
        """The planted truth of each claims row, re-read in this family's own metric where its
        rows measure one (every row is passed; return `truths` for rows not of this family)."""
        return truths

    def simulated_texts(self) -> dict[str, Callable[[Any, Any], str]]:
        """Request tag -> text(backend, request): how the simulated engine (backends/simulated.py,
        `retrace rehearse`) answers this family's own requests, where its texts have a grammar."""
        return {}

    def commands(self) -> dict[str, Callable[[list[str]], int | None]]:
        """CLI subcommands: `retrace NAME ARGS…` calls `commands()[NAME](ARGS)`."""
        return {}

    # Rerun-key inputs (retrace.planning.closure): what the import closure cannot see for itself.

    def unhashed_modules(self) -> dict[str, str]:
        """Modules of this family whose edits must rerun nothing (module -> why): each shapes
        keys or records, never an artifact's bytes; the closure neither hashes nor follows them."""
        return {}

    def data_files(self) -> dict[str, list[str]]:
        """Files besides Python that a module of this family reads to shape its output (module
        -> paths relative to the module's directory, globs allowed); they join its rerun keys."""
        return {}


class FamilyRegistry(Registry[Family]):
    """Families by name; registering a class (a subclass of Family) registers one instance of it."""

    def __init__(self) -> None:
        super().__init__("method family", "retrace", instance_of("retrace.config.families:Family"))

    def register(self, name: str) -> Callable[[Any], Any]:
        add = super().register(name)

        def decorator(cls: type[Family]) -> type[Family]:
            if not (inspect.isclass(cls) and issubclass(cls, Family)):
                raise RegistryError(
                    f"{defined_at(cls)}: method family {name!r} must be a subclass of "
                    f"retrace.config.families:Family, got {described(cls)}"
                )
            if name in self._items and type(self._items[name]) is cls:
                return cls  # the same module imported twice (a reload): nothing new
            family = cls()
            family.name = name
            add(family)
            return cls

        return decorator

    def unregister(self, name: str) -> None:
        """Remove a family (tests that register a toy family clean up with this)."""
        self._items.pop(name, None)

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        pkg = importlib.import_module(self.package)
        for info in pkgutil.iter_modules(pkg.__path__):
            # by file, not find_spec: that would import every subpackage to look inside it
            if info.ispkg and (Path(info.module_finder.path) / info.name / "family.py").is_file():  # type: ignore[union-attr]
                importlib.import_module(f"{self.package}.{info.name}.family")
        for entry in importlib.metadata.entry_points(group="retrace.config.families"):
            entry.load()

    def all(self) -> list[Family]:
        """Every family, in `order` then by name."""
        self._discover()
        return sorted(self._items.values(), key=lambda f: (f.order, f.name))

    def active(self, ctx: Context) -> Iterator[Family]:
        """The families the experiment in `ctx` uses."""
        return (f for f in self.all() if f.active(ctx))


FAMILIES = FamilyRegistry()
