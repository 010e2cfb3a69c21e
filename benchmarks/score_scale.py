"""Benchmark: what scoring a Maj@N' label costs at paper scale, on a synthetic answer set.

    .venv/bin/python benchmarks/score_scale.py [--problems 40] [--n-prime 64 256] [--paper-problems 500]

The score rules (workflow/rules/score.smk, one job per model x backend x dataset x seed) run as
`localrule`s: on a cluster, in the Snakemake controller on the login node. Their cost grows
with the samples of a label: Maj@N' at nominal compute reaches N' in the hundreds, and every
sample's answer is extracted and voted on with math-verify (sympy) equivalence. This builds
`--problems` MATH-style problems (a fraction as the gold answer) whose N' samples each write
~2,000 characters of working and a boxed answer: 60 % the gold in one of several LaTeX forms
(\\frac{a}{b}, \\dfrac, a/b, a decimal where it terminates), 35 % one of three wrong values in
the same forms, 5 % nothing boxed; the order of samples is seeded. It scores them with the real
code (retrace.scoring.score.score_generations, the math task, 2,000 bootstrap draws) in a fresh
process per N' (math-verify's cache starts empty), and prints per N'

    N'=256: 40 problems in T s wall, C s CPU: a 500-problem label Y CPU-min; a paper cell
    (12 labels, two at N') Z CPU-min = R x the 10-min login-node budget (light | not light)

CPU time, not wall time: on a shared machine the wall time grows with the load. A cell's other
ten labels are priced as the N=8 run. The decision in docs/guides/slurm.md comes from this
output. Not covered: answers whose sympy equivalence runs into math-verify's 5 s timeout (each
distinct pair is decided once, retrace.tasks._math.equivalent's cache), and the refinement
diagnostics (per-depth votes: the refinements' N=8 samples again at each depth).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIGHT_MIN = 10.0  # CPU minutes a score job may take on a shared login node (many sites stop a login-node process at 30-60)
CELL_LABELS = 12  # labels of a paper score cell (config/experiment/paper.yaml, refine_full's model)
FILLER = "We simplify the expression step by step, checking each term. " * 32  # ~2,000 characters


def forms(a: int, b: int) -> list[str]:
    """Equivalent ways a model writes a/b."""
    out = [f"\\frac{{{a}}}{{{b}}}", f"\\dfrac{{{a}}}{{{b}}}", f"{a}/{b}"]
    if 1000 % b == 0 or b in (2, 4, 5, 8, 10, 20, 25, 40, 50):
        out.append(f"{a / b:g}")
    return out


def synthetic(problems: int, n_prime: int, seed: int = 0) -> tuple[list, list[dict]]:
    """(Problems, generation rows) of a Maj@N' label: see the module docstring."""
    from retrace.util.records import Problem

    rng = random.Random(seed)
    probs, rows = [], []
    for i in range(problems):
        a, b = rng.randint(1, 97), rng.choice([2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 16, 20, 25])
        gold = f"\\frac{{{a}}}{{{b}}}"
        wrong = [(a + d, b) for d in (1, 2, -1) if a + d > 0]
        samples = []
        for _ in range(n_prime):
            u = rng.random()
            if u < 0.60:
                text = f"{FILLER}\nSo the answer is $\\boxed{{{rng.choice(forms(a, b))}}}$."
            elif u < 0.95:
                x, y = rng.choice(wrong)
                text = f"{FILLER}\nSo the answer is $\\boxed{{{rng.choice(forms(x, y))}}}$."
            else:
                text = FILLER
            samples.append(
                {"text": text, "finish_reason": "stop", "prompt_tokens": 120, "generated_tokens": 700}
            )
        probs.append(Problem(id=f"p{i}", question=f"Simplify {a}/{b}.", gold=gold))
        rows.append({"problem_id": f"p{i}", "method": "majority", "samples": samples, "extra": {}})
    return probs, rows


def one(problems: int, n_prime: int) -> dict:
    """Score one synthetic label in this process: wall and CPU seconds."""
    from retrace.scoring.score import score_generations
    from retrace.util.registry import TASKS

    probs, rows = synthetic(problems, n_prime)
    task = TASKS.get("math500")
    t0, c0 = time.perf_counter(), time.process_time()
    score = score_generations(rows, {p.id: p for p in probs}, task, 1_540_000_000)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "accuracy": score["accuracy"]["value"] if isinstance(score["accuracy"], dict) else score["accuracy"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=int, default=40)
    ap.add_argument("--n-prime", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--paper-problems", type=int, default=500, help="problems of the largest paper dataset")
    ap.add_argument("--one", nargs=2, type=int, help=argparse.SUPPRESS)  # child: PROBLEMS N_PRIME
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(*a.one)))
        return 0
    base = None
    for n_prime in [8, *a.n_prime]:  # N=8: the cell's other labels (Maj@N, refinements, RM@N, ...)
        found = json.loads(
            subprocess.run(
                [sys.executable, __file__, "--one", str(a.problems), str(n_prime)],
                capture_output=True,
                text=True,
                check=True,
                env={"PYTHONPATH": str(REPO / "src"), "PATH": ""},
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        label_min = found["cpu_s"] / a.problems * a.paper_problems / 60
        base = label_min if base is None else base
        cell_min = (CELL_LABELS - 2) * base + 2 * label_min  # the two Maj@N' labels at N'
        print(
            f"N'={n_prime}: {a.problems} problems in {found['wall_s']:.1f} s wall, {found['cpu_s']:.2f} s CPU: "
            f"a {a.paper_problems}-problem label {label_min:.2f} CPU-min; a paper cell ({CELL_LABELS} labels, "
            f"two at N') {cell_min:.1f} CPU-min = {cell_min / LIGHT_MIN:.2f} x the {LIGHT_MIN:g}-min "
            f"login-node budget ({'light' if cell_min <= LIGHT_MIN else 'not light'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
