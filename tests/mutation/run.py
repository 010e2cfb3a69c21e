"""Mutation testing of the integrity core with Cosmic Ray (envs/mutation.txt): do the fast tests
notice a planted bug in the statistics, the claims, the rerun keys, the audit and the cache?

    make mutation                                     # every target below (hours on 2 cores)
    make mutation MUTATION_ARGS="--only closure.py"   # one module, while writing its tests
    make mutation MUTATION_ARGS="--sessions S --budget-s 3600"   # stop after an hour (resume: again)
    make mutation MUTATION_ARGS="--survivors-of S"    # after new tests: rerun the survivors only

Each target is a module (or some of its functions) and the fast tests that exercise it. The
tree is copied to a temporary folder first: Cosmic Ray plants each mutant in the file on disk,
so the checkout is never touched, even by an interrupted run. One mutant runs only its target's
tests (`-x`: the first failure kills it). Prints `mutation score (integrity core): X` (killed
over killed + survived; a mutant that does not import is not counted) and every survivor as
file:line, operator and diff, then `label: value` lines that `make mutation` keeps as a result
file (benchmarks/record.py), from which docs/development/testing.md's table is drawn; that file
lists the survivors judged equivalent. Exit status 1 when the score is below --goal.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Target:
    module: str  # path from the repository root
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()  # only these top-level defs (and their bodies); () = all


PLAN_KEYS = (
    "_plugin_files",
    "_plugins",
    "_entries",
    "stage_entries",
    "stage_sources",
    "templates",
    "engine_rerun_settings",
    "config_slice",
    "rerun_key",
    "cell_rerun_key",
    "shared_key",
)
AUDIT = ("AuditNode", "run_root", "_at", "audit", "_audit_input", "audit_results_table", "lineage_records")
TARGETS = (
    Target("src/retrace/scoring/stats.py", ("tests/unit/test_stats.py", "tests/unit/test_claims.py")),
    Target(
        "src/retrace/scoring/claims.py",
        ("tests/unit/test_claims.py", "tests/unit/test_claims_inputs.py", "tests/unit/test_claims_stage.py"),
    ),
    Target(
        "src/retrace/planning/closure.py", ("tests/unit/test_closure.py", "tests/unit/test_rerun_keys.py")
    ),
    Target(
        "src/retrace/planning/plan.py",
        (
            "tests/unit/test_rerun_keys.py",
            "tests/unit/test_config.py",
            "tests/unit/test_score_cells.py",
            "tests/unit/test_relocation.py",
        ),
        PLAN_KEYS,
    ),
    Target(
        "src/retrace/store/provenance.py",
        ("tests/unit/test_provenance.py", "tests/unit/test_relocation.py", "tests/unit/test_family_hooks.py"),
        AUDIT,
    ),
    Target(
        "src/retrace/store/cache.py",
        (
            "tests/unit/test_cache.py",
            "tests/unit/test_cache_edges.py",
            "tests/unit/test_cache_store_files.py",
            "tests/unit/test_cache_bad_disk.py",  # the full or read-only folder's paths
        ),
    ),
    Target(
        "src/retrace/store/cache_store.py",
        ("tests/unit/test_cache_store_files.py", "tests/unit/test_cache.py"),
    ),
)

# The operators planted: off-by-one and negated comparisons, + and -, * and /, and/or,
# True/False, `not`, numbers, dropped loops, break/continue, exception types. Left out: the rare
# operators (bit shifts, powers, `is` for `<`...), whose mutants are nearly all incompetent or
# equivalent, and removed decorators (here functools.cache: speed, not results).
KEEP = {
    "core/ReplaceBinaryOperator_Add_Sub",
    "core/ReplaceBinaryOperator_Sub_Add",
    "core/ReplaceBinaryOperator_Mul_Div",
    "core/ReplaceBinaryOperator_Div_Mul",
    "core/ReplaceComparisonOperator_Lt_LtE",
    "core/ReplaceComparisonOperator_LtE_Lt",
    "core/ReplaceComparisonOperator_Gt_GtE",
    "core/ReplaceComparisonOperator_GtE_Gt",
    "core/ReplaceComparisonOperator_Eq_NotEq",
    "core/ReplaceComparisonOperator_NotEq_Eq",
    "core/ReplaceComparisonOperator_Is_IsNot",
    "core/ReplaceComparisonOperator_IsNot_Is",
    "core/ReplaceComparisonOperator_In_NotIn",
    "core/ReplaceComparisonOperator_NotIn_In",
    "core/ReplaceUnaryOperator_USub_UAdd",
    "core/ReplaceUnaryOperator_Delete_Not",
    "core/AddNot",
    "core/ReplaceTrueWithFalse",
    "core/ReplaceFalseWithTrue",
    "core/ReplaceAndWithOr",
    "core/ReplaceOrWithAnd",
    "core/ReplaceBreakWithContinue",
    "core/ReplaceContinueWithBreak",
    "core/ExceptionReplacer",
    "core/NumberReplacer",
    "core/ZeroIterationForLoop",
}


def copy_tree(dest: Path) -> Path:
    """The working tree without venvs, results and caches (so no stale bytecode either)."""
    skip = shutil.ignore_patterns(".git", ".venv*", "results", ".snakemake", "__pycache__", "*.egg-info")
    shutil.copytree(REPO, dest, ignore=skip, symlinks=True)
    return dest


def line_ranges(path: Path, names: tuple[str, ...]) -> list[tuple[int, int]]:
    tree = ast.parse(path.read_text())
    found = {n.name: (n.lineno, n.end_lineno) for n in tree.body if hasattr(n, "name")}
    missing = set(names) - set(found)
    if missing:
        raise SystemExit(f"tests/mutation/run.py: {path} has no {sorted(missing)} (update TARGETS)")
    return [found[n] for n in names]


def config(target: Target, python: str, timeout: float) -> str:
    tests = " ".join(target.tests)
    cmd = f"{python} -m pytest -x -q -p no:cacheprovider -p no:xdist {tests}"
    return (
        "[cosmic-ray]\n"
        f'module-path = "{target.module}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{cmd}"\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
    )


def mutant_id(item) -> tuple:
    """A mutant's identity across sessions of one module's unchanged source."""
    m = item.mutations[0]
    return (m.operator_name, m.occurrence, tuple(m.start_pos))


def skip_unselected(db: WorkDB, target: Target, root: Path, only: set | None = None) -> None:
    """Skip the operators not kept, mutants outside the target's functions, and (with `only`,
    a set of mutant_id) every mutant not in it."""
    ranges = line_ranges(root / target.module, target.functions) if target.functions else None
    for item in list(db.pending_work_items):
        m = item.mutations[0]
        inside = ranges is None or any(a <= m.start_pos[0] <= b for a, b in ranges)
        if m.operator_name not in KEEP or not inside or (only is not None and mutant_id(item) not in only):
            db.set_result(
                item.job_id, WorkResult(output="not selected", worker_outcome=WorkerOutcome.SKIPPED)
            )


def earlier(session: Path) -> tuple[list, set, int]:
    """An earlier session's judged mutants (item, result), the ids of its survivors, and how
    many of its mutants it never ran (stopped at a deadline)."""
    if not session.is_file():
        raise SystemExit(f"tests/mutation/run.py: no earlier session {session} (run with --sessions first)")
    with use_db(str(session), WorkDB.Mode.open) as db:
        done = [(item, r) for item, r in db.completed_work_items if r.worker_outcome == WorkerOutcome.NORMAL]
        never = db.num_work_items - db.num_results
    return done, {mutant_id(i) for i, r in done if r.test_outcome == TestOutcome.SURVIVED}, never


@dataclass(frozen=True)
class Run:
    """How to run: the tests' interpreter, seconds per mutant, a deadline (time.monotonic; the
    mutants not run by then stay pending), and folders of kept or earlier sessions."""

    python: str
    timeout: float
    deadline: float = float("inf")
    sessions: Path | None = None  # keep each module's session here; resume one found here
    recheck: Path | None = None  # rerun only the survivors of the sessions in this folder


def run_target(target: Target, root: Path, how: Run) -> tuple[list, int]:
    """Run the target's mutants: (its judged results, mutants left pending at the deadline).
    With `how.recheck` only the earlier survivors run, their new results standing in for the
    old (the earlier kills stand: the tests only grew); a session kept in `how.sessions` by an
    unfinished run is resumed."""
    stem = Path(target.module).stem
    cfg, session = root / "mutation.toml", root / f"{stem}.sqlite"
    cfg.write_text(config(target, how.python, how.timeout))
    cr = [str(Path(sys.executable).with_name("cosmic-ray")), "--verbosity", "ERROR"]
    kept_session = how.sessions / session.name if how.sessions else None
    before, again, never = earlier(how.recheck / session.name) if how.recheck else ([], None, 0)
    if kept_session and kept_session.is_file() and not how.recheck:
        shutil.copy2(kept_session, session)  # resume: Cosmic Ray runs only what is pending
    else:
        subprocess.run([*cr, "init", str(cfg), str(session), "--force"], cwd=root, check=True)
        with use_db(str(session)) as db:
            skip_unselected(db, target, root, again)
    with use_db(str(session)) as db:
        todo = db.num_work_items - db.num_results
    what = f"{todo} earlier survivors" if how.recheck else f"{todo} mutants to run"
    print(f"{target.module}: {what}, tests {' '.join(target.tests)}", flush=True)
    try:
        if how.deadline <= time.monotonic():
            raise subprocess.TimeoutExpired("cosmic-ray exec", 0)
        left = how.deadline - time.monotonic()
        subprocess.run([*cr, "exec", str(cfg), str(session)], cwd=root, check=True, timeout=left)
    except subprocess.TimeoutExpired:
        print(f"{target.module}: stopped at the deadline", flush=True)
        shutil.copy2(REPO / target.module, root / target.module)  # the mutant it was testing
    if kept_session:
        kept_session.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(session, kept_session)
    with use_db(str(session), WorkDB.Mode.open) as db:
        now = [(target.module, r, item) for item, r in db.completed_work_items]
        pending = db.num_work_items - db.num_results
    kept = [(target.module, r, i) for i, r in before if mutant_id(i) not in (again or set())]
    return kept + now, pending + never


def summary(results: list) -> tuple[float, int, list[str]]:
    killed = survived = 0
    survivors: list[str] = []
    for module, r, item in results:
        if r.worker_outcome != WorkerOutcome.NORMAL or r.test_outcome == TestOutcome.INCOMPETENT:
            continue
        if r.test_outcome == TestOutcome.SURVIVED:
            survived += 1
            m = item.mutations[0]
            survivors.append(f"{module}:{m.start_pos[0]} {m.operator_name}\n{r.diff or ''}")
        else:
            killed += 1
    score = killed / (killed + survived) if killed + survived else float("nan")
    return score, killed + survived, survivors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", default=(), help="module file names to run (e.g. closure.py)")
    ap.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"), help="runs the tests")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant's tests")
    ap.add_argument("--goal", type=float, default=0.90)
    ap.add_argument(
        "--sessions", type=Path, help="keep each module's Cosmic Ray session here (and resume one found)"
    )
    ap.add_argument(
        "--survivors-of", type=Path, help="rerun only the survivors of the sessions kept in this folder"
    )
    ap.add_argument("--budget-s", type=float, default=float("inf"), help="stop after this many seconds")
    args = ap.parse_args(argv)
    targets = [t for t in TARGETS if not args.only or Path(t.module).name in args.only]
    start, results, pending = time.monotonic(), [], 0
    how = Run(args.python, args.timeout, start + args.budget_s, args.sessions, args.survivors_of)
    with tempfile.TemporaryDirectory(prefix="retrace-mutation-") as tmp:
        root = copy_tree(Path(tmp) / "tree")
        os.environ["PYTHONPATH"] = str(root / "src")  # the copy's retrace, not the checkout's
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant must never run as stale bytecode
        for target in targets:
            done, left = run_target(target, root, how)
            results, pending = results + done, pending + left
    score, judged, survivors = summary(results)
    for s in survivors:  # the diffs on stderr: record.py keeps stdout's `label: value` lines only
        print(f"survived: {s}", file=sys.stderr)
    took = time.monotonic() - start
    # `label: value` lines, kept by benchmarks/record.py for docs/development/testing.md's figure
    print(f"mutation modules: {' '.join(Path(t.module).name for t in targets)}")
    print(f"survivors: {len(survivors)} ({'; '.join(s.split(chr(10))[0] for s in survivors) or 'none'})")
    print(f"mutants judged: {judged}")
    print(f"mutants not run (deadline): {pending}")
    print(f"mutation run seconds: {took:.0f}")
    print(f"mutation score (integrity core): {score:.3f}")
    return 0 if score >= args.goal else 1


if __name__ == "__main__":
    sys.exit(main())
