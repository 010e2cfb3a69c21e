"""Command line: `python -m retrace <command> …` (also installed as `retrace`).

User commands: `retrace run` (an experiment, through Snakemake), `retrace list` (experiments,
models, datasets, methods), `retrace plan` (list jobs), `retrace status` (running jobs'
progress, read from their logs), `retrace audit PATH…` (verify lineage), `retrace export --out
run.crate.zip` (publish a run as a Provenance Run Crate), `retrace rehearse`.
Internal steps (called by the Snakemake rules): model, data, generate, score-cell (score and
diagnose every job of one model × backend × dataset × seed), claims, report; method families
with their own stages: `retrace drr …`, `retrace art …`.

A new user command registers itself with `@command(name, help, examples)` on a function
that declares its arguments and returns the function that runs it (see `_list`). A failure
the user can fix (a config, a path, a data file) ends in one line; `--debug` (anywhere on
the line) or RETRACE_DEBUG=1 shows the traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from retrace.plan import Job


def _job_args(p: argparse.ArgumentParser) -> None:
    for name in ("model", "backend", "dataset", "method", "label"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--override", action="append", default=[], help="dotted Hydra override, e.g. method.n=8")


def _job(a: argparse.Namespace) -> Job:
    eq = ()
    if getattr(a, "equal_compute_from", None):
        eq = ("", "", a.equal_compute_kind)  # the labels only matter to the planner
    return Job(a.model, a.backend, a.dataset, a.label, a.method, a.seed, tuple(a.override), eq)


def _planned_args(p: argparse.ArgumentParser) -> None:
    """The experiment whose score files (and diagnostics) a stage reads, instead of listing
    them as arguments: a paper-scale grid's paths overflow the command line."""
    p.add_argument("--experiment", default=None, help="read the score files of this experiment's plan")
    p.add_argument("--override", action="append", default=[], help="a global override (config `overrides`)")
    p.add_argument("--results", type=Path, default=Path("results"), help="the run's results directory")


def _planned(a: argparse.Namespace, kind: str, suffix: str, only=None) -> list[Path]:
    """The files given as arguments, or else those of --experiment's plan (retrace.plan.planned_files)."""
    from retrace.plan import planned_files

    if a.experiment is None:
        return a.scores if kind == "scores" else a.diagnostics
    if a.scores or (kind == "diagnostics" and a.diagnostics):
        _parser().error(f"{a.command}: give {kind} files or --experiment, not both")
    return planned_files({"experiment": a.experiment, "overrides": a.override}, a.results, kind, suffix, only)


# name -> (one-line help, examples, builder): the builder declares the command's arguments on
# its parser and returns the function that runs it (Namespace -> exit status).
COMMANDS: dict[str, tuple[str, tuple[str, ...], Callable]] = {}
# Examples for the user commands that are still branches of main() below, shown in their --help.
EXAMPLES = {
    "plan": (
        "retrace plan                              # the configured experiment's jobs and cost estimate",
        "retrace plan --experiment paper --estimate",
        "retrace plan --experiment paper --check   # validate every job before renting a GPU",
    ),
    "status": ("retrace status", "retrace status --logs results/logs/generate --stale-after 120"),
    "audit": (
        "retrace audit results/report/results.csv   # the report's whole lineage",
        "retrace audit --quiet results/report/results.csv   # only failures and a count",
        "retrace audit --crate run.crate.zip        # an exported run, offline",
    ),
    "export": (
        "retrace export --out run.crate.zip",
        "retrace export --out run.crate.zip --include-generations --agent 'A. Researcher'",
    ),
}
USER_ORDER = ("run", "list", "plan", "status", "audit", "export", "rehearse", "deviations")


def command(name: str, help: str, examples: tuple[str, ...]) -> Callable:
    """Register a user command (a duplicate name is an error, not a silent replacement)."""

    def register(build: Callable) -> Callable:
        if name in COMMANDS:
            raise ValueError(f"retrace command {name!r} is registered twice")
        COMMANDS[name] = (help, examples, build)
        return build

    return register


def _with_examples(p: argparse.ArgumentParser, examples: tuple[str, ...]) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)


def _overview(sub_help: dict[str, str]) -> str:
    """The top-level help: user commands first, then the internal steps the rules call."""
    users = [n for n in USER_ORDER if n in sub_help]
    steps = [n for n in sub_help if n not in users] + ["drr …", "art …", "serve …"]
    width = max(len(n) for n in users)
    return (
        "A reproducibility workbench for LLM test-time reasoning.\n\ncommands:\n"
        + "\n".join(f"  {n:<{width}}  {sub_help[n]}" for n in users)
        + "\n\ninternal steps (the workflow's rules call these): "
        + ", ".join(steps)
        + "\n\nRun `retrace COMMAND --help` for a command's options and examples."
    )


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="retrace", formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--debug", action="store_true", help="show the traceback of a failure (also RETRACE_DEBUG=1)"
    )
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True, help=argparse.SUPPRESS)
    p = sub.add_parser("model", help="materialise and fingerprint a model")
    p.add_argument("--model", required=True)
    p.add_argument("--override", action="append", default=[])
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("data", help="prepare a dataset in the canonical schema")
    p.add_argument("--dataset", required=True)
    p.add_argument("--mirror", default=None, help="benchmark mirror directory; '-': none (retrace.mirror)")
    p.add_argument("--override", action="append", default=[])
    p.add_argument("--out", type=Path, required=True)
    for name in ("generate", "score"):
        p = sub.add_parser(name, help=f"{name} one job")
        _job_args(p)
        p.add_argument("--data", type=Path, required=True)
        p.add_argument("--manifest", type=Path, required=True)
        p.add_argument("--out", type=Path, required=True)
        if name == "generate":
            p.add_argument("--cache", type=Path, required=True)
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
            p.add_argument("--shards", type=int, default=1, help="… of K (retrace.shards)")
        else:
            p.add_argument("--generations", type=Path, required=True)
    p = sub.add_parser("probe", help="measure the raw engine's full-batch tok/s (for the run summary)")
    _job_args(p)
    p.add_argument("--manifest", type=Path, required=True)
    p.add_argument("--tokens", type=int, default=None)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("merge-shards", help="join a job's data-parallel shard outputs")
    _job_args(p)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("shards", type=Path, nargs="+", help="shard outputs, in shard order")
    p = sub.add_parser("diagnose", help="per-depth diagnostics of a refinement job")
    _job_args(p)
    p.add_argument("--generations", type=Path, required=True)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser(
        "score-cell", help="score (and diagnose) every job of one model, backend, dataset, seed"
    )
    p.add_argument("--experiment", required=True)
    p.add_argument("--override", action="append", default=[], help="a global override (config `overrides`)")
    for name in ("model", "backend", "dataset"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--results", type=Path, default=Path("results"), help="the run's results directory")
    p = sub.add_parser("claims", help="paper claims as gates (claims.csv)")
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
    _planned_args(p)
    p = sub.add_parser("report", help="build the results table")
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--claims", type=Path, default=None)
    p.add_argument("--diagnostics", type=Path, action="append", default=[], help="repeatable")
    p.add_argument(
        "--section",
        type=Path,
        action="append",
        default=[],
        help="a method family's report section JSON (repeatable; see report/sections.py)",
    )
    p.add_argument(
        "--probe",
        type=Path,
        action="append",
        default=[],
        help="a probe stage output: the raw engine rate for the run summary (repeatable)",
    )
    p.add_argument("scores", type=Path, nargs="*")
    _planned_args(p)
    p = sub.add_parser("audit", help="verify an artifact's lineage back to its sources")
    p.add_argument("paths", type=Path, nargs="*")
    p.add_argument("--quiet", action="store_true", help="print only the failing artifacts and a count")
    p.add_argument(
        "--crate", type=Path, default=None, help="verify an exported crate (.zip or folder) instead, offline"
    )
    p = sub.add_parser("status", help="progress of running jobs, read from their logs")
    p.add_argument(
        "--logs", type=Path, default=Path("results/logs"), help="log directory (searched recursively)"
    )
    p.add_argument(
        "--stale-after",
        type=float,
        default=600.0,
        help="seconds without a new log line after which a job is shown as stale",
    )
    p = sub.add_parser("export", help="package a finished run as a Provenance Run Crate (zip)")
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--include-generations",
        action="store_true",
        help="copy the generations too (else referenced by checksum)",
    )
    p.add_argument("--agent", default=None, help="who ran it (Person name; default: the user)")
    p = sub.add_parser("plan", help="list the jobs of the configured experiment")
    p.add_argument("--configfile", type=Path, default=Path("config/config.yaml"))
    p.add_argument("--experiment", default=None, help="instead of the config file's")
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
    for name, (text, examples, build) in COMMANDS.items():
        p = sub.add_parser(name, help=text, description=text)
        _with_examples(p, examples)
        p.set_defaults(handler=build(p))
    for name, examples in EXAMPLES.items():
        _with_examples(sub.choices[name], examples)
    helps = {a.dest: a.help for a in sub._choices_actions}
    helps["rehearse"] = "an experiment's claims design with planted effects (retrace rehearse --help)"
    ap.description = _overview(helps)
    return ap


def _audit(paths: list[Path], quiet: bool) -> int:
    """Each path's lineage tree; with `quiet`, only the failing artifacts and a count."""
    from retrace.provenance import audit, audit_results_table

    ok, checked, failed = True, set(), {}
    for path in paths:
        node = audit(path)
        problems = audit_results_table(path) if path.suffix == ".csv" and node.ok else []
        ok = ok and node.all_ok() and not problems
        checked |= {n.path for n in node.walk()}
        failed |= {n.path: n.problems for n in node.walk() if n.problems}
        if not quiet:
            print("\n".join(node.lines()))
        elif problems:
            failed[str(path)] = failed.get(str(path), []) + problems
        for line in problems if not quiet else []:
            print(f"! {line}")
    if quiet:
        for where, why in failed.items():
            print(f"[BAD] {where}" + "".join(f"\n      ! {p}" for p in why))
    count = f" ({len(failed)} of {len(checked)} artifacts failed)" if quiet and not ok else ""
    print("audit: OK" if ok else f"audit: FAILED{count}")
    return 0 if ok else 1


def _audit_crate(crate: Path) -> int:
    from retrace.export.verify import verify

    problems = verify(crate)
    for line in problems:
        print(f"! {line}")
    print(f"audit --crate {crate}: " + ("OK" if not problems else f"FAILED ({len(problems)} problems)"))
    return 0 if not problems else 1


def _export(results: Path, out: Path, generations: bool, agent: str | None) -> int:
    from retrace.export.crate import export

    try:
        path = export(results, out, generations, agent)
    except (FileNotFoundError, ValueError) as e:  # no run, or a changed artifact: say which
        print(f"retrace export: {e}", file=sys.stderr)
        return 1
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB); verify: retrace audit --crate {path}")
    return 0


def _plan(
    configfile: Path,
    experiment: str | None,
    estimate_only: bool,
    check: bool = False,
    as_json: Path | None = None,
) -> int:
    import yaml

    from retrace.config import check_global
    from retrace.estimate import estimate
    from retrace.mirror import resolve
    from retrace.plan import jobs, shared_overrides

    cfg = check_global(yaml.safe_load(configfile.read_text()))
    cfg["mirror"] = resolve(cfg["mirror"])[0]
    if experiment:
        cfg["experiment"] = experiment
    if check:
        from retrace.preflight import check as preflight

        notes: list[str] = []
        failures = preflight(cfg, notes)
        for line in notes:
            print(f"check: {line}")
        for where, why in failures:
            print(f"check: FAIL {where}: {why}")
        # Runtimes against the partition limit, with the retries of the SLURM profile beside config/.
        from retrace.cluster import runtime_check

        for line, fails in runtime_check(cfg, configfile.resolve().parents[1] / "profiles" / "slurm"):
            print(f"check: {'FAIL' if fails else 'note'} {line}")
            failures += [("max_runtime", line)] if fails else []
        print(f"check: {cfg['experiment']}: {len(jobs(cfg))} jobs, {len(failures)} problems")
        return 1 if failures else 0
    planned = jobs(cfg)
    if not estimate_only:
        print("\n".join(j.path for j in planned))
    # CPU jobs are priced at the probe's measured rate when a run here has one (results/probe)
    print(estimate(planned, cfg["mirror"], shared_overrides(cfg, "dataset"), Path("results/probe")).line())
    _plan_bounds(cfg, planned, as_json)
    from retrace.config import load_experiment
    from retrace.estimate import family_lines

    for line in family_lines(load_experiment(cfg["experiment"]), cfg["mirror"], Path("results/probe")):
        print(line)
    return 0


def _plan_bounds(cfg: dict, planned: list, as_json: Path | None) -> None:
    """The equal-compute bound ratios line; with --json, each job's bound (retrace.sizing)."""
    import json

    from retrace.estimate import equal_compute_line
    from retrace.plan import shared_overrides
    from retrace.sizing import job_bounds

    dso = shared_overrides(cfg, "dataset")
    line = equal_compute_line(planned, cfg["mirror"], dso)
    if line:
        print(line)
    if as_json is None:
        return
    limit = int(cfg.get("max_runtime") or 0) or None
    rows = [b.as_dict(limit) for b in job_bounds(planned, cfg["mirror"], dso, Path("results/probe"))]
    text = json.dumps({"max_runtime": limit, "jobs": rows}, indent=1) + "\n"
    if str(as_json) == "-":
        sys.stdout.write(text)
    else:
        as_json.write_text(text)
        print(f"per-job bounds: {as_json} ({len(rows)} jobs)")


@command(
    "list",
    "experiments, models, datasets and methods, one line each",
    (
        "retrace list               # everything",
        "retrace list datasets      # [bundled] ones run from a clone alone; [mirror] ones need the mirror",
        "retrace list experiments models",
    ),
)
def _list(p: argparse.ArgumentParser) -> Callable:
    from retrace import catalog

    kinds = list(catalog.GROUPS)
    # no `choices=`: Python 3.11's argparse checks the empty default of nargs="*" against them
    # and refuses a bare `retrace list` (fixed in 3.12, gh-72795)
    p.add_argument("kinds", nargs="*", metavar="KIND", help=f"any of {', '.join(kinds)} (default: all)")

    def run(a: argparse.Namespace) -> None:
        unknown = [k for k in a.kinds if k not in kinds]
        if unknown:
            p.error(f"unknown KIND {unknown[0]!r} (choose from {', '.join(kinds)})")
        print(catalog.render(a.kinds or kinds))

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
    from retrace import launch

    p.add_argument("--experiment", "-e", help="config/experiment/<name>.yaml (`retrace list experiments`)")
    p.add_argument("--limit", type=int, help="at most N questions per dataset (the override dataset.limit=N)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config/config.yaml key (mirror, probe, …) or a dotted override (method.n=8); repeatable",
    )
    p.add_argument("--cores", type=int, default=2, help="CPU cores Snakemake may use (default 2)")
    p.add_argument("--dry-run", "-n", action="store_true", help="show the jobs that would run; run nothing")
    p.add_argument("snakemake_args", nargs=argparse.REMAINDER, help="after --: passed to Snakemake unchanged")

    def run(a: argparse.Namespace) -> int:
        extra = a.snakemake_args[1:] if a.snakemake_args[:1] == ["--"] else a.snakemake_args
        return launch.run(launch.command(a, extra))

    return run


@command(
    "deviations",
    "where retrace differs from a paper it reproduces, one `deviation:` line each",
    (
        "retrace deviations --experiment paper       # the refinement paper's register",
        "retrace deviations --experiment drr_paper | grep 'can change a verdict: yes'",
    ),
)
def _deviations(p: argparse.ArgumentParser) -> Callable:
    from retrace import deviations

    p.add_argument("--experiment", "-e", required=True, choices=deviations.experiments())

    def run(a: argparse.Namespace) -> None:
        print("\n".join(deviations.lines(a.experiment)))

    return run


@command(
    "cache",
    "maintain the request cache (compact: fold each index shard's log into its sorted base)",
    (
        "retrace cache compact                               # results/cache/requests",
        "retrace cache compact --cache /shared/retrace-cache # a cache shared between checkouts",
    ),
)
def _cache(p: argparse.ArgumentParser) -> Callable:
    p.add_argument(
        "action", choices=["compact"], help="compact: rewrite the index shards sorted (safe while jobs run)"
    )
    p.add_argument("--cache", type=Path, default=Path("results/cache/requests"), help="the cache folder")

    def run(a: argparse.Namespace) -> int:
        from retrace.cache import RequestCache

        if not a.cache.is_dir():
            raise ValueError(f"no request cache at {a.cache} (--cache names its folder)")
        n = RequestCache(a.cache, job="compact").compact()
        print(f"{a.cache}: index compacted, {n} entries")
        return 0

    return run


# Method families with stages of their own (`retrace drr train …`, `retrace art run …`):
# each owns its sub-commands in `<module>.main(argv)`, so adding one touches only this table.
FAMILIES = {
    "drr": "retrace.drr.cli",
    "art": "retrace.art.cli",
    "rehearse": "retrace.rehearse",
    "leakcheck": "retrace.drr.leak",  # `retrace leakcheck --jsonl FILE`: do prompts carry their gold?
    "serve": "retrace.serve",  # `retrace serve --model M --endpoint FILE`: one engine for many jobs
}


def main(argv: list[str] | None = None) -> int:
    """Run one command; a failure the user can fix ends in one line naming it (exit 2)."""
    from retrace.config import ConfigError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv or os.environ.get("RETRACE_DEBUG") == "1"
    argv = [x for x in argv if x != "--debug"]
    from retrace.stop import stopping

    try:
        with stopping():  # SIGTERM/SIGINT: cleanup runs, then the process dies by that signal
            return _dispatch(argv)
    except BrokenPipeError:
        # `retrace list | head`: the reader left; say nothing more (and nothing at exit)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ConfigError, OSError, ValueError) as e:
        if debug:
            raise
        name = argv[0] if argv and not argv[0].startswith("-") else "retrace"
        print(
            f"retrace {name}: {_one_line(e)}  (--debug or RETRACE_DEBUG=1 for the traceback)", file=sys.stderr
        )
        return 2


def _one_line(e: BaseException) -> str:
    """The exception as one line: its message, with the type where the message alone is unclear."""
    text = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, PermissionError):
        where = f": {e.filename}" if e.filename else ""
        return f"{e.strerror or 'Permission denied'}{where}; is the folder read-only?"
    return text if type(e).__name__.endswith(("ConfigError", "Missing")) else f"{type(e).__name__}: {text}"


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] in FAMILIES:
        import importlib

        return importlib.import_module(FAMILIES[argv[0]]).main(argv[1:]) or 0
    a = _parser().parse_args(argv)
    if getattr(a, "handler", None):
        return a.handler(a) or 0
    if a.command == "model":
        from retrace.stages import model

        model.run(a.model, a.out, tuple(a.override))
    elif a.command == "data":
        from retrace.stages import data

        data.run(a.dataset, None if a.mirror in ("-", "") else a.mirror, a.out, tuple(a.override))
    elif a.command == "generate":
        from retrace.stages import generate

        generate.run(
            _job(a),
            a.data,
            a.manifest,
            a.cache,
            a.out,
            tuple(a.equal_compute_from) if a.equal_compute_from else None,
            a.scorer_manifest,
            shard=(a.shard, a.shards) if a.shard is not None else None,
        )
    elif a.command == "probe":
        from retrace.stages import probe

        probe.run(_job(a), a.manifest, a.out, a.tokens or probe.PROBE_TOKENS)
    elif a.command == "merge-shards":
        from retrace.stages import generate

        generate.merge(_job(a), a.data, a.shards, a.out)
    elif a.command == "score":
        from retrace.stages import score

        score.run(_job(a), a.generations, a.data, a.manifest, a.out)
    elif a.command == "diagnose":
        from retrace.stages import diagnose

        diagnose.run(_job(a), a.generations, a.data, a.out)
    elif a.command == "score-cell":
        from retrace.stages import score_cell

        score_cell.run(a.experiment, tuple(a.override), (a.model, a.backend, a.dataset, a.seed), a.results)
    elif a.command == "claims":
        from retrace.stages import claims

        pairs = [claims.parse_pair(w) for w in a.weaker]
        primary = None
        if a.primary:
            primary = claims.Primary(tuple(a.primary), a.primary_alpha, tuple(a.primary_dataset))
        subset = claims.override_subset(a.override)
        claims.run(_planned(a, "scores", ".json"), a.out, a.extra, pairs, primary, a.controls, subset)
    elif a.command == "report":
        from retrace.plan import diagnosed
        from retrace.stages import report

        scores, diagnostics = _planned(a, "scores", ".json"), _planned(a, "diagnostics", ".json", diagnosed)
        if not scores:
            _parser().error("report: give score files or --experiment")
        report.run(scores, a.out_dir, a.claims, diagnostics, a.section, a.probe)
    elif a.command == "audit":
        if a.crate is not None and a.paths:
            _parser().error("audit: give artifact paths or --crate CRATE, not both")
        if a.crate is not None:
            return _audit_crate(a.crate)
        if not a.paths:
            _parser().error("audit: give artifact paths or --crate CRATE")
        return _audit(a.paths, a.quiet)
    elif a.command == "status":
        from retrace.progress import format_status, status

        print(format_status(status(a.logs, a.stale_after)))
    elif a.command == "export":
        return _export(a.results, a.out, a.include_generations, a.agent)
    elif a.command == "plan":
        return _plan(a.configfile, a.experiment, a.estimate, a.check, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
