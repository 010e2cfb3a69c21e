"""Benchmark: how long Snakemake takes to plan the paper grid, at its 3 seeds and at 10x the seeds.

    .venv/bin/python benchmarks/planner_scale.py [--experiment paper] [--scales 1 10] [--repeat R]

For each scale it copies the workflow (Snakefile, workflow/, config/, profiles/) into a scratch folder
(no results there, so every job is planned), adds a copy of the experiment whose every run has
`scale` times the seeds (0, 1, … scale*len(seeds)-1), and times one dry run of it
(`snakemake -n --quiet rules`). Prints, per scale,

    paper x10: dry-run jobs: J, seconds: T (CPU C s)

J is Snakemake's own job count (its `total` line), T the wall time of the whole dry run
(interpreter start, config composition, rerun keys, DAG) and C its CPU time: on a machine
shared with other work the wall time grows with the load, the CPU time much less. With
`--repeat R` each dry run below is timed R times and the least is reported (as timeit does: the
machine's own speed; the rest is other load), with a line giving the least, median and most.
Each scale is then planned again: that run (`paper x10 again`) reads the sizing the first kept under
.snakemake/retrace (retrace.planning.sized_cache), as a second `snakemake` and every job's own
do; then the workflow is parsed for one small target, as each job's own Snakemake parses it, with
the kept sizing and without. The target is T <= 15 s at 10x on a quiet 2-core machine (issue 57).
Run by `make bench`.

Since a machine's speed drifts (threefold hour to hour on shared hosts), a change is judged side
by side: `--against DIR` (another checkout, e.g. `git worktree add /tmp/old <commit>`) plans the
same grids with that checkout's workflow and code in turn with this one's, `--rounds` times each,
and prints the least CPU time of each and their ratio:

    paper x10 side by side: CPU s: 18.6 here, 24.1 against 7d69302 (ratio 0.77)
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def scaled_experiment(source: Path, scale: int) -> dict:
    """The experiment with each run's seeds stretched to `scale` times as many."""
    exp = yaml.safe_load(source.read_text())
    for run in exp["runs"]:
        seeds = run.get("seeds", [0])
        run["seeds"] = list(range(len(seeds) * scale))
    return exp


def workflow_copy(work: Path, experiment: str, scale: int, repo: Path = HERE) -> str:
    """Copy `repo`'s workflow into `work` with the scaled experiment; return the experiment's name."""
    for name in ("Snakefile", "workflow", "config", "profiles"):
        src = repo / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, work / name)
    cfg = yaml.safe_load((work / "config/config.yaml").read_text())
    cfg["mirror"] = mirror_for(work, cfg["mirror"])
    (work / "config/config.yaml").write_text(yaml.safe_dump(cfg))
    name = f"{experiment}_x{scale}"
    exp = scaled_experiment(repo / "config/experiment" / f"{experiment}.yaml", scale)
    (work / "config/experiment" / f"{name}.yaml").write_text(yaml.safe_dump(exp))
    return name


def mirror_for(work: Path, configured: str | None) -> str:
    """The mirror this checkout resolves (retrace.config.mirror: key, $RETRACE_MIRROR, the folder
    beside), as an absolute path, since the copy has no folder beside it; else an empty
    stand-in folder: a plan needs the mirror directory to exist, and sizes jobs it cannot
    read as unknown."""
    from retrace.config.mirror import resolve

    found = resolve(configured)[0]
    if found:
        return str((HERE / found).resolve())
    stand_in = work / "no-mirror"
    stand_in.mkdir()
    print(f"planner_scale: no benchmark mirror here; planning against an empty {stand_in}", flush=True)
    return str(stand_in)


def dry_run(
    work: Path, experiment: str, *targets: str, config: tuple = (), repo: Path = HERE
) -> tuple[int, float, float]:
    """(jobs, wall seconds, CPU seconds) of one dry run of `experiment` (or of `targets`) in `work`,
    with `repo`'s code."""
    env = {**os.environ, "RETRACE_CONFIG_DIR": str(work / "config"), "PYTHONPATH": str(repo / "src")}
    # targets first: --config (and --forcerun) take every word after them
    cmd = [SNAKEMAKE, *targets, "-n", "--quiet", "rules", "--config", f"experiment={experiment}", *config]
    started, cpu = time.perf_counter(), _children_cpu()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    seconds, cpu = time.perf_counter() - started, _children_cpu() - cpu
    if proc.returncode != 0:
        sys.exit(f"dry run of {experiment} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    total = re.findall(r"^total\s+(\d+)", proc.stdout + proc.stderr, flags=re.M)
    return int(total[-1]), seconds, cpu


def drop_kept_sizing(work: Path) -> None:
    """Forget the sizing a dry run in `work` kept (retrace.planning.sized_cache), for a cold run."""
    shutil.rmtree(work / ".snakemake" / "retrace", ignore_errors=True)


def timed_runs(work: Path, name: str, label: str, repeat: int, cold: bool = True) -> tuple[int, float, float]:
    """`repeat` dry runs, cold (the kept sizing dropped before each) or reading the kept sizing;
    the least (jobs, wall s, CPU s) of them, as timeit reports the least of its repeats: the
    machine's own speed, the rest being other load. With repeat > 1 it also prints the spread,
    so a reader sees how far one run may be from it."""
    runs = []
    for _ in range(repeat):
        if cold:
            drop_kept_sizing(work)
        runs.append(dry_run(work, name))
    if repeat > 1:
        walls = sorted(r[1] for r in runs)
        print(
            f"{label} runs: {repeat}, seconds: least {walls[0]:.1f}, "
            f"median {statistics.median(walls):.1f}, most {walls[-1]:.1f}",
            flush=True,
        )
    return min(runs, key=lambda r: r[1])


def one_job_parse(work: Path, name: str, experiment: str, scale: int) -> None:
    """What each job's own Snakemake pays (a SLURM job's): the workflow parsed for one small
    target (the first dataset's data job), with the kept sizing and without it (as every job's
    parse sized the whole experiment before it was kept)."""
    exp = yaml.safe_load((work / "config/experiment" / f"{name}.yaml").read_text())
    target = (f"results/data/{exp['runs'][0]['datasets'][0]}.jsonl", "--forcerun", "data")
    for label, kept in (("one job's parse", True), ("one job's parse, sizing not kept", False)):
        if not kept:
            drop_kept_sizing(work)
        # estimate=false: a job's own Snakemake prints no estimate (common.smk: the main process only)
        _, seconds, cpu = dry_run(work, name, *target, config=("estimate=false",))
        print(f"{experiment} x{scale} {label}: seconds: {seconds:.1f} (CPU {cpu:.1f} s)", flush=True)


def side_by_side(tmp: Path, experiment: str, scale: int, other: Path, rounds: int) -> None:
    """Cold dry runs (no kept sizing) of this checkout and `other`, alternating, `rounds` each:
    the least CPU time of each and their ratio, one machine at one time."""
    works = {}
    for label, repo in (("here", HERE), ("against", other)):
        work = tmp / f"x{scale}-{label}"
        work.mkdir()
        works[label] = (work, repo, workflow_copy(work, experiment, scale, repo))
    best = {label: float("inf") for label in works}
    for _ in range(rounds):
        for label, (work, repo, name) in works.items():
            drop_kept_sizing(work)
            best[label] = min(best[label], dry_run(work, name, repo=repo)[2])
    print(
        f"{experiment} x{scale} side by side: CPU s: {best['here']:.1f} here, {best['against']:.1f} "
        f"against {_commit(other)} (ratio {best['here'] / best['against']:.2f})",
        flush=True,
    )


def _commit(repo: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return out.stdout.strip() or str(repo)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", default="paper")
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 10])
    ap.add_argument(
        "--against", type=Path, help="another checkout to plan side by side (its workflow and src/)"
    )
    ap.add_argument("--rounds", type=int, default=3, help="side-by-side dry runs of each checkout")
    ap.add_argument(
        "--repeat", type=int, default=1, help="dry runs of each kind and scale (the least is reported)"
    )
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="retrace-planner-") as tmp:
        for scale in a.scales:
            work = Path(tmp) / f"x{scale}"
            work.mkdir()
            name = workflow_copy(work, a.experiment, scale)
            # cold first; then again, reading the sizing the cold runs kept
            for cold, label in (
                (True, f"{a.experiment} x{scale}"),
                (False, f"{a.experiment} x{scale} again"),
            ):
                jobs, seconds, cpu = timed_runs(work, name, label, a.repeat, cold)
                print(
                    f"{label}: dry-run jobs: {jobs}, seconds: {seconds:.1f} (CPU {cpu:.1f} s)",
                    flush=True,
                )
            one_job_parse(work, name, a.experiment, scale)
            if a.against:
                side_by_side(Path(tmp), a.experiment, scale, a.against.resolve(), a.rounds)


if __name__ == "__main__":
    main()
