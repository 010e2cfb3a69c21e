"""Score one generation artifact: `score_generations(rows, problems, task, params)`.

`rows` are the JSONL rows of one (model, dataset, method, seed) job, one per problem:
{"problem_id", "method", "samples": [{"text", "finish_reason", "prompt_tokens",
"cached_prompt_tokens", "generated_tokens", ...}], "extra"}. The task supplies
`extract_answer(text, problem)`, `is_correct(answer, problem)` and `same_answer(a, b)`.

accuracy is the correctness of the plurality vote over all N samples of each problem
(plain accuracy when N = 1). FLOPs use the 2 x params per token approximation of the
forward pass (Kaplan et al. 2020, "Scaling Laws for Neural Language Models",
https://arxiv.org/abs/2001.08361, sec. 2.1), which ignores the attention term:
    nominal   = 2 * params * (prompt + generated)
    effective = 2 * params * (prompt - cached_prompt + generated)
where cached_prompt counts prompt tokens whose KV the engine reused. Samples served from
retrace's own request cache still count in full: the numbers describe the cost of producing
the artifact, not of this particular run; `request_cache_hits` says how many there were.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from retrace.records import Problem
from retrace.scoring.metrics import (DEFAULT_BOOT, DEFAULT_LEVEL, DEFAULT_SEED, estimate,
                                     ks_for, maj_at_k_correct, pass_at_k)
from retrace.scoring.vote import plurality_index


def safe_extract(task: Any, text: Any, problem: Problem) -> tuple[str | None, bool]:
    """(answer, failed): the task's answer, or None when the text yields none.

    A task that raises on garbage text is a task bug, but one bad sample must not lose a
    whole job's score: the sample is counted wrong and the failure is counted.
    """
    if not isinstance(text, str):
        return None, True
    try:
        answer = task.extract_answer(text, problem)
    except Exception:  # noqa: BLE001 - see docstring; counted in extract_errors
        return None, True
    return (None if answer is None else str(answer)), False


def score_problem(row: dict, problem: Problem, task: Any) -> dict:
    """Answers, correctness and vote of one problem's samples."""
    answers, errors = [], 0
    for sample in row["samples"]:
        answer, failed = safe_extract(task, sample.get("text"), problem)
        answers.append(answer)
        errors += failed
    correct = [a is not None and bool(task.is_correct(a, problem)) for a in answers]
    idx = plurality_index(answers, task.same_answer)
    return {"id": problem.id, "answers": answers, "correct": correct,
            "vote": None if idx is None else answers[idx],
            "vote_correct": idx is not None and correct[idx], "extract_errors": errors}


def check_rows(rows: list[dict], problems: dict[str, Problem]) -> None:
    """Every row names a known problem, once, and carries at least one sample."""
    if not rows:
        raise ValueError("no generation rows to score")
    seen: set[str] = set()
    for row in rows:
        pid = str(row.get("problem_id"))
        if pid not in problems:
            raise ValueError(f"generation row names unknown problem_id {pid!r}")
        if pid in seen:
            raise ValueError(f"problem_id {pid!r} appears in more than one generation row")
        if not row.get("samples"):
            raise ValueError(f"generation row for problem_id {pid!r} has no samples")
        seen.add(pid)


def token_totals(rows: list[dict], params: int) -> tuple[dict, dict, dict, int]:
    """(tokens, flops, finish_reason counts, request-cache hits) summed over every sample."""
    prompt = cached = generated = hits = 0
    reasons: Counter = Counter()
    for row in rows:
        for s in row["samples"]:
            prompt += int(s.get("prompt_tokens", 0))
            cached += int(s.get("cached_prompt_tokens", 0))
            generated += int(s.get("generated_tokens", 0))
            hits += bool(s.get("cache_hit", False))
            reasons[str(s.get("finish_reason"))] += 1
    tokens = {"prompt": prompt, "cached_prompt": cached, "generated": generated,
              "per_problem_mean_generated": generated / len(rows)}
    flops = {"nominal": 2 * params * (prompt + generated),
             "effective": 2 * params * (prompt - cached + generated)}
    return tokens, flops, dict(sorted(reasons.items())), hits


def k_metrics(per_problem: list[dict], same_answer: Any, n_boot: int, seed: int
              ) -> tuple[dict, dict]:
    """maj@k (with CI) on the first k samples, and pass@k over all samples, for each k."""
    n_min = min(len(p["answers"]) for p in per_problem)
    maj, pas = {}, {}
    for k in ks_for(n_min):
        flags = [maj_at_k_correct(p["answers"], p["correct"], k, same_answer)
                 for p in per_problem]
        maj[k] = estimate(flags, n_boot, seed)
        pas[k] = float(sum(pass_at_k(len(p["correct"]), sum(p["correct"]), k)
                           for p in per_problem) / len(per_problem))
    return maj, pas


def score_generations(rows: Iterable[dict], problems: dict[str, Problem], task: Any,
                      params: int, n_boot: int = DEFAULT_BOOT, seed: int = DEFAULT_SEED
                      ) -> dict:
    """The score dict of one job (see module docstring); raises ValueError on bad rows."""
    rows = list(rows)
    check_rows(rows, problems)
    per_problem = [score_problem(r, problems[str(r["problem_id"])], task) for r in rows]
    tokens, flops, reasons, hits = token_totals(rows, params)
    maj, pas = k_metrics(per_problem, task.same_answer, n_boot, seed)
    return {
        "n_problems": len(rows),
        "n_samples": sum(len(r["samples"]) for r in rows),
        "accuracy": estimate([p["vote_correct"] for p in per_problem], n_boot, seed),
        "maj@k": maj, "pass@k": pas,
        "ci": {"method": "percentile bootstrap over problems", "n_boot": n_boot,
               "seed": seed, "level": DEFAULT_LEVEL},
        "tokens": tokens, "flops": flops, "params": params,
        "finish_reasons": reasons, "request_cache_hits": hits,
        "extract_errors": sum(p.pop("extract_errors") for p in per_problem),
        "per_problem": per_problem,
    }
