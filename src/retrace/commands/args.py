"""Arguments the internal steps share (retrace/commands/steps.py and the method families'
steps, such as the spine's in retrace/spine/commands.py): a job's identity, and the experiment
whose planned files a stage reads instead of a command line too long for a paper-scale grid."""

from __future__ import annotations

import argparse
from pathlib import Path

from retrace.planning.plan import Job


def job_args(p: argparse.ArgumentParser) -> None:
    for name in ("model", "backend", "dataset", "method", "label"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--override", action="append", default=[], help="dotted Hydra override, e.g. method.n=8")


def job_of(a: argparse.Namespace) -> Job:
    eq: tuple[str, ...] = ()
    if getattr(a, "equal_compute_from", None):
        eq = ("", "", a.equal_compute_kind)  # the labels only matter to the planner
    return Job(a.model, a.backend, a.dataset, a.label, a.method, a.seed, tuple(a.override), eq)


def planned_args(p: argparse.ArgumentParser) -> None:
    """The experiment whose score files (and diagnostics) a stage reads, instead of listing
    them as arguments: a paper-scale grid's paths overflow the command line."""
    p.add_argument("--experiment", default=None, help="read the score files of this experiment's plan")
    p.add_argument("--override", action="append", default=[], help="a global override (config `overrides`)")
    p.add_argument("--results", type=Path, default=Path("results"), help="the run's results directory")


def planned_paths(
    p: argparse.ArgumentParser, a: argparse.Namespace, kind: str, suffix: str, only=None
) -> list[Path]:
    """The files given as arguments, or else those of --experiment's plan (retrace.planning.plan.planned_files)."""
    from retrace.planning.plan import planned_files

    if a.experiment is None:
        return a.scores if kind == "scores" else a.diagnostics
    if a.scores or (kind == "diagnostics" and a.diagnostics):
        p.error(f"give {kind} files or --experiment, not both")
    return planned_files({"experiment": a.experiment, "overrides": a.override}, a.results, kind, suffix, only)
