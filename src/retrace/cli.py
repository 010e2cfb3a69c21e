"""Command line: `python -m retrace <command> …` (also installed as `retrace`).

User commands: `retrace run` (an experiment, through Snakemake), `retrace list` (experiments,
models, datasets, methods), `retrace plan` (list jobs), `retrace status` (running jobs'
progress, read from their logs), `retrace audit PATH…` (verify lineage), `retrace export --out
run.crate.zip` (publish a run as a Provenance Run Crate), `retrace rehearse`.
Internal steps (called by the Snakemake rules): model, data, generate, score-cell (score and
diagnose every job of one model × backend × dataset × seed), claims, report; method families
with their own stages: `retrace drr …`, `retrace art …`.

Every command registers itself with `@command(name, help, examples)` (an internal step with
`step=True`) on a function that declares its arguments and returns the function that runs it;
the commands live in retrace/commands/ (one module per group, each imported here by a scan)
and the method families' own in their packages (retrace.config.families `commands`). A failure
the user can fix (a config, a path, a data file) ends in one line; `--debug` (anywhere on
the line) or RETRACE_DEBUG=1 shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable

# The registry of commands lives with them (retrace/commands/__init__.py); importing it
# registers every command. `command` is re-exported: `from retrace.cli import command`.
from retrace.commands import COMMANDS as COMMANDS
from retrace.commands import command as command

USER_ORDER = ("run", "list", "plan", "pilot", "status", "audit", "export", "rehearse", "deviations")


def _with_examples(p: argparse.ArgumentParser, examples: tuple[str, ...]) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)


def _overview(sub_help: dict[str, str]) -> str:
    """The top-level help: user commands first, then the internal steps the rules call."""
    users = [n for n in USER_ORDER if n in sub_help]
    steps = [n for n in sub_help if n not in users] + [f"{n} …" for n in own_parsers() if n not in users]
    width = max(len(n) for n in users)
    return (
        "A reproducibility workbench for LLM test-time reasoning.\n\ncommands:\n"
        + "\n".join(f"  {n:<{width}}  {sub_help[n]}" for n in users)
        + "\n\ninternal steps (the workflow's rules call these): "
        + ", ".join(steps)
        + "\n\nRun `retrace COMMAND --help` for a command's options and examples."
    )


def _commands() -> dict:
    """COMMANDS once every method family is found: a family's module registers its steps (the
    spine's generate, score, claims …) when the scan imports it."""
    from retrace.config.families import FAMILIES

    FAMILIES.all()
    return COMMANDS


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="retrace", formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--debug", action="store_true", help="show the traceback of a failure (also RETRACE_DEBUG=1)"
    )
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True, help=argparse.SUPPRESS)
    # the internal steps first, in the order they run, then the user commands
    for name, c in sorted(_commands().items(), key=lambda item: not item[1].step):
        p = sub.add_parser(name, help=c.help, description=None if c.step else c.help)
        if c.examples:
            _with_examples(p, c.examples)
        p.set_defaults(handler=c.build(p))
    helps = {name: c.help for name, c in sorted(COMMANDS.items(), key=lambda item: not item[1].step)}
    helps["rehearse"] = "an experiment's claims design with planted effects (retrace rehearse --help)"
    ap.description = _overview(helps)
    return ap


# Commands with parsers of their own, `<module>.main(argv)`; the method families' commands
# (`retrace drr train …`, `retrace art run …`, `retrace leakcheck …`) come from their
# registrations (retrace.config.families `commands`), so adding a family touches no line here.
OWN_PARSERS = {
    "rehearse": "retrace.app.rehearse",
    "serve": "retrace.app.serve",  # `retrace serve --model M --endpoint FILE`: one engine for many jobs
}


def own_parsers() -> dict[str, Callable[[list[str]], int | None]]:
    """Every command that parses its own arguments: name -> main(argv)."""
    from retrace.config.families import FAMILIES

    def lazy(module: str) -> Callable[[list[str]], int | None]:
        return lambda argv: importlib.import_module(module).main(argv)  # imported when it runs

    out: dict[str, Callable[[list[str]], int | None]] = {}
    for family in FAMILIES.all():
        out.update(family.commands())
    return out | {name: lazy(module) for name, module in OWN_PARSERS.items()}


def main(argv: list[str] | None = None) -> int:
    """Run one command; a failure the user can fix ends in one line naming it (exit 2)."""
    from retrace.config.compose import ConfigError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv or os.environ.get("RETRACE_DEBUG") == "1"
    argv = [x for x in argv if x != "--debug"]
    from retrace.util.stop import stopping

    try:
        with stopping():  # SIGTERM/SIGINT: cleanup runs, then the process dies by that signal
            try:
                return _dispatch(argv)
            finally:
                _lock_summary()
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


def _lock_summary() -> None:
    """One log line on the request cache's locks this command took, if any: a job log then
    shows whether the job waited on another's lock (tests/cluster/test_slurm_chaos.py reads it).
    Logged before a SIGTERM/SIGINT ends the process, too."""
    from retrace.store.cache_lock import stats

    if stats["acquired"]:
        logging.getLogger("retrace.store.cache").info(
            "request cache locks: %d taken, longest wait %.3f s", stats["acquired"], stats["longest_wait_s"]
        )


def _one_line(e: BaseException) -> str:
    """The exception as one line: its message, with the type where the message alone is unclear."""
    text = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, PermissionError):
        where = f": {e.filename}" if e.filename else ""
        return f"{e.strerror or 'Permission denied'}{where}; is the folder read-only?"
    return text if type(e).__name__.endswith(("ConfigError", "Missing")) else f"{type(e).__name__}: {text}"


def _dispatch(argv: list[str]) -> int:
    mains = own_parsers() if argv and argv[0] not in _commands() else {}
    if argv and argv[0] in mains:
        return mains[argv[0]](argv[1:]) or 0
    a = _parser().parse_args(argv)
    return a.handler(a) or 0


if __name__ == "__main__":
    sys.exit(main())
