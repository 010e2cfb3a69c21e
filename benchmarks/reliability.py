"""The reliability suite: kills, races, corruptions and bad inputs on the plumbing experiment.

    make reliability        # = PYTHONPATH=src python benchmarks/reliability.py
    python benchmarks/reliability.py --only kills,bad_inputs --kills-per-kind 3   # a part
    make reliability-quick  # = --quick: 2 kills of each kind, one race, one corrupt-cache run (CI)

Runs the embedded SmolLM2 plumbing experiment (config/experiment/plumbing.yaml) small and in
the deterministic engine mode (reliability_kit.OVERRIDES) in scratch checkouts under --work,
once uninterrupted as the reference, then prints one line per figure, `name: value`:

  kills, kills_identical, requests_regenerated_after_kill   kill -9 and rerun (reliability_kills)
  concurrent_same_dir, concurrent_shared_cache              two runs at once (reliability_faults)
  corrupt_cache_entries, disk_full, audit_tamper            damage (reliability_faults)
  bad_inputs                                                 clear errors (reliability_inputs)

A line starting with `!` under a figure says what did not hold. Exit status 1 if anything did
not. Not part of `make test`: it runs the workflow some 30 times (about 20-30 minutes on a
loaded 2-core machine). disk_full and the read-only mirror need root (to mount a tmpfs).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reliability_faults import (
    audit_tamper,
    concurrent_same_dir,
    concurrent_shared_cache,
    corrupt_cache_entries,
    disk_full,
)
from reliability_inputs import bad_inputs
from reliability_kills import kill_suite
from reliability_kit import Checkout, outcome, timed

FIGURES = (
    "kills",
    "concurrent_same_dir",
    "concurrent_shared_cache",
    "corrupt_cache_entries",
    "disk_full",
    "bad_inputs",
    "audit_tamper",
)

# The reduced form (--quick): a few kills of each kind, one race, one run on damaged cache entries.
QUICK = ("kills", "concurrent_same_dir", "corrupt_cache_entries")


def say(name: str, value, problems: list[str] = ()) -> bool:
    print(f"{name}: {value}", flush=True)
    for p in problems:
        print(f"  ! {p}", flush=True)
    return not problems


def reference_run(work: Path, keep: bool) -> tuple[Checkout, dict, float]:
    stamp = work / "reference-seconds"
    if keep and stamp.exists():  # a finished reference from an earlier --keep run
        co = Checkout.existing(work / "reference")
        return co, outcome(co.root), float(stamp.read_text())
    co = Checkout(work / "reference")
    done, seconds = timed(co.snakemake)
    if done.returncode:
        sys.exit(f"the uninterrupted reference run failed:\n{done.stderr[-3000:]}")
    stamp.write_text(str(seconds))
    return co, outcome(co.root), seconds


def run_kills(args, work, ref, reference, seconds) -> bool:
    s = kill_suite(work, reference, seconds, args.kills_per_kind, args.per_round, args.seed)
    ok = say("kills", s.kills)
    say("kills_by_stage", ", ".join(f"{k}={v}" for k, v in sorted(s.stages.items())))
    ok &= say("kills_identical", s.kills_identical, s.problems)
    ok &= say("requests_regenerated_after_kill", s.regenerated)
    return ok and s.kills_identical == s.kills and s.regenerated == 0 and s.kills >= 2 * args.kills_per_kind


def run_bad_inputs(work, ref) -> bool:
    cases = bad_inputs(work, ref.root)
    ran = [c for c in cases if not c.skipped]
    clear = sum(c.ok for c in ran)
    ok = say(
        "bad_inputs",
        f"{len(ran)} tried, {clear} clear errors, nothing half-written; {len(cases) - len(ran)} skipped",
        [f"{c.name}: {c.detail}" for c in ran if not c.ok],
    )
    for c in cases:
        print(f"  {'--' if c.skipped else 'ok' if c.ok else 'NO'}  {c.name}: {c.detail}", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--work", type=Path, help="scratch folder (default: a fresh one under $TMPDIR, removed at the end)"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill moments and damaged entries")
    ap.add_argument("--kills-per-kind", type=int, default=10, help="kills of Snakemake, and again of jobs")
    ap.add_argument(
        "--per-round", type=int, default=10, help="kills per fresh checkout before a clean finish"
    )
    ap.add_argument("--keep", action="store_true", help="reuse --work's finished reference run (development)")
    ap.add_argument("--only", default=",".join(FIGURES), help=f"comma-separated subset of {FIGURES}")
    ap.add_argument("--quick", action="store_true", help="the reduced form for CI: " + ", ".join(QUICK))
    args = ap.parse_args(argv)
    if args.quick:
        args.kills_per_kind, args.per_round, args.only = 2, 2, ",".join(QUICK)
    only = set(args.only.split(","))
    if problem := prepare_work(args):
        print(f"reliability: {problem}", file=sys.stderr)
        return 2
    start = time.monotonic()
    say("date", datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"))
    say("work", args.work)
    ref, reference, seconds = reference_run(args.work, args.keep)
    say("reference_run_s", f"{seconds:.0f}")
    ok, work = True, args.work
    if "kills" in only:
        ok &= run_kills(args, work, ref, reference, seconds)
    steps = {
        "concurrent_same_dir": lambda: concurrent_same_dir(work, reference, ref.cache),
        "concurrent_shared_cache": lambda: concurrent_shared_cache(work, reference),
        "corrupt_cache_entries": lambda: corrupt_cache_entries(work, reference, ref.cache, args.seed),
        "disk_full": lambda: disk_full(work, reference, ref.cache),
        "audit_tamper": lambda: audit_tamper(ref.root),
    }
    for name in FIGURES:
        if name in only and name in steps:
            ok &= say(name, *steps[name]())
        elif name in only and name == "bad_inputs":
            ok &= run_bad_inputs(work, ref)
    say("suite_minutes", f"{(time.monotonic() - start) / 60:.1f}")
    say("all_held", ok)
    if args.fresh and ok:  # a failed run's folder stays for inspection
        shutil.rmtree(args.work, ignore_errors=True)
    return 0 if ok else 1


def prepare_work(args) -> str | None:
    """A scratch folder of our own: a fresh temporary one unless --work names one.

    A fixed default under /tmp broke when another user (or root) had left a run there: the
    clean-up could not delete their files. Returns one line saying what is wrong, or None."""
    args.fresh = args.work is None
    if args.fresh:
        if args.keep:
            return "--keep needs --work (the folder of the earlier run)"
        args.work = Path(tempfile.mkdtemp(prefix="retrace-reliability-"))
        return None
    if not args.keep and args.work.exists():
        try:
            shutil.rmtree(args.work)
        except OSError as e:
            return f"cannot clear --work {args.work}: {e.strerror}: {e.filename} (choose another folder)"
    args.work.mkdir(parents=True, exist_ok=True)
    return None


if __name__ == "__main__":
    sys.exit(main())
