"""`retrace run`: the common Snakemake invocation, built from a few plain options.

    retrace run                                   # the configured experiment (config/config.yaml)
    retrace run --experiment refine_smoke --limit 20
    retrace run --experiment paper --set method.sampling.max_tokens=512 --set mirror=/data/bench
    retrace run --experiment smoke -n             # dry run: what would run, nothing runs

It prints the Snakemake command it runs (so the long form is there to copy), streams
Snakemake's output, and ends a failed run with one line: the first error Snakemake reported
and the log to read.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

from retrace.config.compose import CONFIG_DIR, ConfigError, load_schema

REPO = CONFIG_DIR.parent  # where the Snakefile is: Snakemake runs there
# Lines of Snakemake's output worth repeating at the end of a failed run, most specific first:
# a retrace step's own one-line error (in a job log Snakemake prints), an exception line
# ("MirrorMissing: dataset …"), a Snakemake header whose message is on the next line
# ('ConfigError in file "…/common.smk", line 13:'), a failed job ("Error in rule data:").
_STEP = re.compile(r"^retrace [\w-]+: (?P<msg>.+)$")
_EXCEPTION = re.compile(r"^(?P<msg>\w+(Error|Missing|Exception): .+)$")
_HEADER = re.compile(r"^(?P<type>\w+) in (file|rule) .*:$")
_JOB = re.compile(r"^Error in rule (?P<rule>\S+):$")
_LOG = re.compile(r"^\s+log: (\S+)")
_NOT_A_CAUSE = ("WorkflowError: At least one job", "CalledProcessError")


def failure_line(lines: list[str]) -> tuple[str | None, str | None]:
    """(the most telling error line, the failed job's log) from Snakemake's output."""
    found: dict[int, str] = {}
    log = None
    stripped = [line.strip() for line in lines]
    for i, line in enumerate(stripped):
        if (m := _STEP.match(line)) and "traceback" in line:
            found.setdefault(0, m["msg"].split("  (--debug")[0])
        elif (m := _EXCEPTION.match(line)) and not line.startswith(_NOT_A_CAUSE):
            found.setdefault(1, m["msg"])
        elif (m := _HEADER.match(line)) and m["type"] not in _NOT_A_CAUSE:
            following = [s for s in stripped[i + 1 : i + 3] if s and s != "Error:"]
            found.setdefault(2, f"{m['type']}: {following[0]}" if following else line)
        elif m := _JOB.match(line):
            found.setdefault(3, f"job {m['rule']} failed")
        if log is None and (m := _LOG.match(lines[i])):
            log = m.group(1)
    return (found[min(found)] if found else None), log


def config_args(experiment: str | None, limit: int | None, settings: list[str]) -> list[str]:
    """`--config` items for Snakemake: top-level keys (mirror, probe, …) as `key=value`, every
    other `key=value` (dotted: method.n=8) and `--limit N` (dataset.limit=N) as overrides."""
    top = set(load_schema()["properties"]) - {"overrides"}
    items, overrides = [], []
    if experiment:
        items.append(f"experiment={experiment}")
    if limit is not None:
        overrides.append(f"dataset.limit={limit}")
    for s in settings:
        key, sep, _ = s.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {s!r}: expected key=value, e.g. --set method.n=8 or --set probe=false")
        if key == "overrides":
            raise ConfigError("--set overrides=…: give each override as its own --set key=value")
        (items if key in top else overrides).append(s if key in top else s.lstrip())
    if overrides:
        items.append("overrides=" + json.dumps(overrides))
    return items


def command(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """The Snakemake command line for `retrace run`'s arguments (experiment, limit, set, cores, dry_run)."""
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(args.cores)]
    if args.dry_run:
        cmd.append("-n")
    cmd += extra  # before --config, which takes every word after it (a target would be one)
    items = config_args(args.experiment, args.limit, args.set)
    return cmd + ["--config", *items] if items else cmd


def run(cmd: list[str]) -> int:
    """Run Snakemake in the repository, echoing its output; one summary line if it fails."""
    print("running: " + " ".join(_quote(c) for c in ["snakemake", *cmd[3:]]), flush=True)
    lines = []
    with subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            lines.append(line)
    if proc.returncode:
        error, log = failure_line(lines)
        where = f"; its log: {log}" if log else ""
        print(f"retrace run: failed: {error or 'see above'}{where}", file=sys.stderr)
    return proc.returncode


def _quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def global_config(configfile, experiment: str | None, settings: list[str]) -> dict:
    """The checked global config of `configfile` with `--experiment` and `retrace run`'s
    `--set` items applied (config_args: top-level keys, and the rest as the global
    `overrides`), as the workflow's Snakemake sees them: `retrace plan` and `retrace
    pilot` plan what `retrace run` with the same options runs."""
    import yaml

    from retrace.config.compose import check_global
    from retrace.config.mirror import resolve

    with open(configfile) as f:
        raw = yaml.safe_load(f) or {}
    for item in config_args(experiment, None, settings):
        key, _, value = item.partition("=")
        # as Snakemake's --config does: the key replaced (the file's `overrides` too)
        raw[key] = (
            json.loads(value)
            if key == "overrides"
            else value
            if key == "experiment"
            else yaml.safe_load(value)
        )
    cfg = check_global(raw)
    cfg["mirror"] = resolve(cfg["mirror"])[0]
    return cfg
