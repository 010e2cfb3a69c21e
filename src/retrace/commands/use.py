"""The porcelain a user starts with: `retrace run`, `retrace list`, `retrace plan`, `retrace deviations`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from retrace.commands import command

if TYPE_CHECKING:
    from retrace.planning.parts import Sized


@command(
    "plan",
    "list the jobs of the configured experiment",
    (
        "retrace plan                              # the configured experiment's jobs and cost estimate",
        "retrace plan --experiment paper --estimate",
        "retrace plan --experiment paper --check   # validate every job before renting a GPU",
        "retrace plan --experiment paper --set backend=served --check   # service mode",
    ),
)
def _plan_command(p: argparse.ArgumentParser) -> Callable:
    p.add_argument("--configfile", type=Path, default=Path("config/config.yaml"))
    p.add_argument("--experiment", default=None, help="instead of the config file's")
    set_arg(p)
    p.add_argument("--estimate", action="store_true", help="print the cost estimate only")
    p.add_argument(
        "--check",
        action="store_true",
        help="validate every job (context, pinned weights, GPU memory, budgets); exit 1 naming failures",
    )
    p.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="with --estimate: write each job's bound (tokens, GPU-seconds, attempts) to FILE ('-': stdout)",
    )
    return lambda a: plan(a.configfile, a.experiment, a.estimate, a.check, a.json, a.set)


def set_arg(p: argparse.ArgumentParser) -> None:
    """`--set KEY=VALUE`, as `retrace run` takes it (retrace.app.launch.config_args)."""
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config/config.yaml key (mirror, probe, …) or a dotted override (method.n=8); repeatable",
    )


def plan(
    configfile: Path,
    experiment: str | None,
    estimate_only: bool,
    check: bool = False,
    as_json: Path | None = None,
    settings: list[str] | None = None,
) -> int:
    """The jobs and the cost estimate of the configured experiment, or (`check`) every check."""
    from retrace.app.launch import global_config
    from retrace.config.compose import load_experiment
    from retrace.planning.cluster import limit as cluster_limit
    from retrace.planning.estimate import estimate_of, family_lines, load_share_line, rate_lines
    from retrace.planning.parts import engine_loads, sized
    from retrace.planning.plan import jobs, shared_overrides

    cfg = global_config(configfile, experiment, settings or [])
    if check:
        return _check(cfg, configfile)
    planned = jobs(cfg)
    if not estimate_only:
        print("\n".join(j.path for j in planned))
    # the jobs the workflow runs (cell parts, shard jobs) at the partition limit and the SLURM
    # profile's attempts; CPU jobs priced at the probe's measured rate where a run here has one
    limit = cluster_limit(cfg, _slurm_profile(configfile))
    s = sized(planned, cfg["mirror"], shared_overrides(cfg, "dataset"), Path("results/probe"), limit)
    print(estimate_of(planned, s).line())
    loads = engine_loads(s)
    print(loads.line())
    print(loads.per_label_line())
    print("\n".join([load_share_line(s), *rate_lines(s)]))
    _plan_bounds(cfg, planned, s, as_json)
    for line in family_lines(load_experiment(cfg["experiment"]), cfg["mirror"], Path("results/probe")):
        print(line)
    return 0


def _plan_bounds(cfg: dict, planned: list, s: Sized, as_json: Path | None) -> None:
    """The equal-compute bound ratios line; with --json, each job's bound (retrace.planning.parts: cell
    parts and shard jobs) and each label's (retrace.planning.sizing)."""
    import json

    from retrace.planning.estimate import equal_compute_line
    from retrace.planning.plan import shared_overrides

    line = equal_compute_line(planned, cfg["mirror"], shared_overrides(cfg, "dataset"))
    if line:
        print(line)
    if as_json is None:
        return
    minutes = s.limit.minutes
    rows = [p.as_dict(s.limit) for p in s.parts] + [b.as_dict(minutes) for _, b in s.shards]
    limits = {"max_runtime": minutes, "attempts_allowed": s.limit.attempts}
    labels = [b.as_dict(minutes) for b in s.labels]
    text = json.dumps({**limits, "jobs": rows, "labels": labels}, indent=1) + "\n"
    if str(as_json) == "-":
        sys.stdout.write(text)
    else:
        as_json.write_text(text)
        print(f"per-job bounds: {as_json} ({len(rows)} jobs, {len(labels)} labels)")


def _slurm_profile(configfile: Path) -> Path:
    """profiles/slurm beside the config file's config/ (a run directory's own), else this
    checkout's: a config file kept elsewhere (`--configfile /tmp/x.yaml`) is checked against
    the shipped profile's retries, not against none."""
    from retrace.planning.cluster import slurm_profile

    return slurm_profile(configfile.resolve().parents[1])


def _check(cfg: dict, configfile: Path) -> int:
    """`retrace plan --check`: every job and family block (retrace.planning.preflight), and the runtimes
    against the partition limit with the retries of the SLURM profile beside config/."""
    from retrace.config.compose import load_experiment
    from retrace.deviations import register_problems
    from retrace.planning.cluster import runtime_check
    from retrace.planning.pilot_check import pilot_lines
    from retrace.planning.plan import jobs
    from retrace.planning.preflight import check as preflight

    notes: list[str] = []
    failures = preflight(cfg, notes)
    failures += register_problems(cfg["experiment"], load_experiment(cfg["experiment"]))
    for line in notes:
        print(f"check: {line}")
    for where, why in failures:
        print(f"check: FAIL {where}: {why}")
    for line, fails in runtime_check(cfg, _slurm_profile(configfile)):
        print(f"check: {'FAIL' if fails else 'note'} {line}")
        failures += [("max_runtime", line)] if fails else []
    for line, fails in pilot_lines(cfg, Path("results/pilot")):
        print(f"check: {'FAIL' if fails else 'note'} {line}")
        failures += [("pilot", line)] if fails else []
    print(f"check: {cfg['experiment']}: {len(jobs(cfg))} jobs, {len(failures)} problems")
    return 1 if failures else 0


@command(
    "list",
    "experiments, models, datasets and methods, one line each; plugins and where each is defined",
    (
        "retrace list               # everything a run can name",
        "retrace list datasets      # [bundled] ones run from a clone alone; [mirror] ones need the mirror",
        "retrace list experiments models",
        "retrace list plugins       # every registered method, backend, task, tool, family: file:line",
    ),
)
def _list(p: argparse.ArgumentParser) -> Callable:
    from retrace.app import catalog

    kinds = list(catalog.KINDS)
    # no `choices=`: Python 3.11's argparse checks the empty default of nargs="*" against them
    # and refuses a bare `retrace list` (fixed in 3.12, gh-72795)
    p.add_argument(
        "kinds", nargs="*", metavar="KIND", help=f"any of {', '.join(kinds)} (default: all but plugins)"
    )

    def run(a: argparse.Namespace) -> None:
        unknown = [k for k in a.kinds if k not in kinds]
        if unknown:
            p.error(f"unknown KIND {unknown[0]!r} (choose from {', '.join(kinds)})")
        print(catalog.render(a.kinds or list(catalog.GROUPS)))

    return run


@command(
    "run",
    "run an experiment through Snakemake (the common case; `snakemake` itself takes every option)",
    (
        "retrace run                                  # the configured experiment (config/config.yaml)",
        "retrace run --experiment refine_smoke --limit 20",
        "retrace run --experiment smoke -n            # dry run: list what would run",
        "retrace run --experiment paper --set mirror=/data/bench --set method.sampling.max_tokens=512",
        "retrace run -- --keep-going                  # anything after -- goes to Snakemake as is",
    ),
)
def _run(p: argparse.ArgumentParser) -> Callable:
    from retrace.app import launch

    p.add_argument("--experiment", "-e", help="config/experiment/<name>.yaml (`retrace list experiments`)")
    p.add_argument("--limit", type=int, help="at most N questions per dataset (the override dataset.limit=N)")
    set_arg(p)
    p.add_argument("--cores", type=int, default=2, help="CPU cores Snakemake may use (default 2)")
    p.add_argument("--dry-run", "-n", action="store_true", help="show the jobs that would run; run nothing")
    p.add_argument("snakemake_args", nargs=argparse.REMAINDER, help="after --: passed to Snakemake unchanged")

    def run(a: argparse.Namespace) -> int:
        extra = a.snakemake_args[1:] if a.snakemake_args[:1] == ["--"] else a.snakemake_args
        return launch.run(launch.command(a, extra))

    return run


# Commands with parsers of their own, `<module>.main(argv)`; the method families' commands


@command(
    "deviations",
    "where retrace differs from a paper it reproduces, one `deviation:` line each",
    (
        "retrace deviations --experiment paper       # the refinement paper's register",
        "retrace deviations --experiment drr_paper | grep 'can change a verdict: yes'",
        "retrace deviations --experiment art_paper --claims   # each headline claim: its rows or entry",
        "retrace deviations --experiment paper --check        # every switch checked by its effect",
    ),
)
def _deviations(p: argparse.ArgumentParser) -> Callable:
    from retrace import deviations

    p.add_argument("--experiment", "-e", required=True, choices=deviations.experiments())
    what = p.add_mutually_exclusive_group()
    what.add_argument("--claims", action="store_true", help="print the claims map, one `claim:` line each")
    what.add_argument(
        "--check", action="store_true", help="check the register and claims map; exit 1 on a problem"
    )

    def run(a: argparse.Namespace) -> int:
        from retrace.deviations import claims_map

        if a.check:
            return _check_register(a.experiment)
        print("\n".join(claims_map.lines(a.experiment) if a.claims else deviations.lines(a.experiment)))
        return 0

    return run


def _check_register(experiment: str) -> int:
    """`retrace deviations --check`: one `check: FAIL where: why` line per problem."""
    from retrace import deviations
    from retrace.config.compose import CONFIG_DIR, load_experiment
    from retrace.report.paper import NUMBERS

    found = deviations.problems(experiment, load_experiment(experiment), CONFIG_DIR, NUMBERS)
    for where, why in found:
        print(f"check: FAIL {where}: {why}")
    print(f"check: {'FAIL' if found else 'ok'} register of {experiment} ({len(found)} problems)")
    return 1 if found else 0
