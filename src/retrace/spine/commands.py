"""The spine family's internal steps (plumbing the workflow's rules call; `retrace COMMAND --help`
for each): generate, generate-cell, score, merge-shards, diagnose, score-cell, claims. Importing this module
registers them (retrace.commands `command`); spine/family.py imports it, so the `retrace`
entry point finds them by the family scan. Each parses its arguments here and calls the stage
function in retrace.stages that tests call."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from retrace.commands import command
from retrace.commands.args import job_args, job_of, planned_args, planned_paths


@command("generate", "generate one job", step=True)
def _generate(p: argparse.ArgumentParser) -> Callable:
    job_args(p)
    for name in ("data", "manifest", "out", "cache"):
        p.add_argument(f"--{name}", type=Path, required=True)
    p.add_argument(
        "--equal-compute-from",
        type=Path,
        nargs=2,
        metavar=("REFINE", "MAJORITY"),
        help="price N' from these generations (for Maj@N' jobs)",
    )
    p.add_argument("--equal-compute-kind", choices=("effective", "nominal"), default="effective")
    p.add_argument(
        "--scorer-manifest",
        type=Path,
        default=None,
        help="manifest of the judge model when the scorer names another model",
    )
    p.add_argument("--shard", type=int, default=None, help="run only data-parallel shard I …")
    p.add_argument("--shards", type=int, default=1, help="… of K (retrace.store.shards)")

    def run(a: argparse.Namespace) -> None:
        from retrace.stages import generate

        generate.run(
            job_of(a),
            a.data,
            a.manifest,
            a.cache,
            a.out,
            tuple(a.equal_compute_from) if a.equal_compute_from else None,
            a.scorer_manifest,
            shard=(a.shard, a.shards) if a.shard is not None else None,
        )

    return run


@command("score", "score one job", step=True)
def _score(p: argparse.ArgumentParser) -> Callable:
    job_args(p)
    for name in ("data", "manifest", "out", "generations"):
        p.add_argument(f"--{name}", type=Path, required=True)

    def run(a: argparse.Namespace) -> None:
        from retrace.stages import score

        score.run(job_of(a), a.generations, a.data, a.manifest, a.out)

    return run


@command("merge-shards", "join a job's data-parallel shard outputs", step=True)
def _merge_shards(p: argparse.ArgumentParser) -> Callable:
    job_args(p)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("shards", type=Path, nargs="+", help="shard outputs, in shard order")
    # accepted and unused (a merge reads no requests): the rule `generate` runs generation or a
    # merge with one shell line, which names the request cache outside its params
    p.add_argument("--cache", type=Path, default=None, help=argparse.SUPPRESS)

    def run(a: argparse.Namespace) -> None:
        from retrace.stages import generate

        generate.merge(job_of(a), a.data, a.shards, a.out)

    return run


@command("diagnose", "per-depth diagnostics of a refinement job", step=True)
def _diagnose(p: argparse.ArgumentParser) -> Callable:
    job_args(p)
    for name in ("generations", "data", "out"):
        p.add_argument(f"--{name}", type=Path, required=True)

    def run(a: argparse.Namespace) -> None:
        from retrace.stages import diagnose

        diagnose.run(job_of(a), a.generations, a.data, a.out)

    return run


def _cell_args(p: argparse.ArgumentParser) -> None:
    """A cell's arguments: the experiment (and overrides), model, backend, dataset, seed, results."""
    p.add_argument("--experiment", required=True)
    p.add_argument("--override", action="append", default=[], help="a global override (config `overrides`)")
    for name in ("model", "backend", "dataset"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--results", type=Path, default=Path("results"), help="the run's results directory")


@command(
    "generate-cell",
    "generate the unsharded labels of one model, backend, dataset, seed (or one part's) on one engine",
    step=True,
)
def _generate_cell(p: argparse.ArgumentParser) -> Callable:
    _cell_args(p)
    p.add_argument("--cache", type=Path, required=True, help="the request cache")
    p.add_argument(
        "--labels",
        default="",
        help="comma-separated: only these labels (one part of the cell, retrace.planning.parts)",
    )

    def run(a: argparse.Namespace) -> None:
        from retrace.stages import generate_cell

        cell = (a.model, a.backend, a.dataset, a.seed)
        labels = tuple(x for x in a.labels.split(",") if x)
        generate_cell.run(a.experiment, tuple(a.override), cell, a.results, a.cache, labels)

    return run


@command("score-cell", "score (and diagnose) every job of one model, backend, dataset, seed", step=True)
def _score_cell(p: argparse.ArgumentParser) -> Callable:
    _cell_args(p)

    def run(a: argparse.Namespace) -> None:
        from retrace.stages import score_cell

        score_cell.run(a.experiment, tuple(a.override), (a.model, a.backend, a.dataset, a.seed), a.results)

    return run


@command("claims", "paper claims as gates (claims.csv)", step=True)
def _claims(p: argparse.ArgumentParser) -> Callable:
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--primary", action="append", default=[], help="a pre-registered primary claim (repeatable)"
    )
    p.add_argument("--primary-dataset", action="append", default=[], help="... on this dataset (repeatable)")
    p.add_argument("--primary-alpha", type=float, default=0.04, help="the primary claims' share of alpha")
    p.add_argument(
        "--extra",
        type=Path,
        action="append",
        default=[],
        help="a method family's claims CSV to merge (repeatable)",
    )
    p.add_argument(
        "--weaker",
        action="append",
        default=[],
        metavar="WEAK,STRONG",
        help="a pre-registered model pair for 'weaker models gain most' (repeatable)",
    )
    p.add_argument(
        "--controls",
        action="store_true",
        help="add the positive (majority vs greedy) and A/A (sample 1 vs 0 of majority) control rows",
    )
    p.add_argument("scores", type=Path, nargs="*")
    planned_args(p)

    def run(a: argparse.Namespace) -> None:
        from retrace.stages import claims

        pairs = [claims.parse_pair(w) for w in a.weaker]
        primary = None
        if a.primary:
            primary = claims.Primary(tuple(a.primary), a.primary_alpha, tuple(a.primary_dataset))
        subset = claims.override_subset(a.override)
        claims.run(planned_paths(p, a, "scores", ".json"), a.out, a.extra, pairs, primary, a.controls, subset)

    return run
