"""Score one generation artifact: `score_generations(rows, problems, task, params)`.

Answer provenance: the task's `extract(text, problem)` says how each answer was found
(retrace.tasks.base.SOURCES: boxed / statement / fallback / none; a task with only
`extract_answer` is read as "statement"), and a sample whose finish_reason is "length" is
marked truncated. The paper-faithful vote (`scoring.vote: explicit`, the default) counts only
explicit answers (boxed, statement); `scoring.vote: any` also counts fallback guesses and is
labelled so in the score record. Per run: `answer_sources` (share of samples per source),
`answer_paths` (samples per extraction rule, Extraction.path: results.csv's answer_paths),
`truncated_rate`, and `extract_errors` = samples with no counted answer (of which
`extract_exceptions` raised inside the task).

`rows` are the JSONL rows of one (model, dataset, method, seed) job, one per problem:
{"problem_id", "method", "samples": [{"text", "finish_reason", "prompt_tokens",
"cached_prompt_tokens", "generated_tokens", ...}], "extra"}. The task supplies
`extract_answer(text, problem)`, `is_correct(answer, problem)` and `same_answer(a, b)`.

accuracy is the correctness of the plurality vote over all N samples of each problem
(plain accuracy when N = 1), or, for methods that select one sample themselves (RM@N,
beam and lookahead search put its index in `extra["chosen"]`, in every row: a job where some
rows chose and some did not is refused, method_chose), of the selected sample; `selection`
says which, and `scorer` names the scorer that made the choice. Such rows also
carry `extra["compute"]` = {"policy": tokens, "scorer": tokens}: their samples are not their
whole cost (pruned candidates, judge calls), so tokens and FLOPs come from there. FLOPs use the 2 x params per token approximation of the
forward pass (Kaplan et al. 2020, "Scaling Laws for Neural Language Models",
https://arxiv.org/abs/2001.08361, sec. 2.1), which ignores the attention term:
    nominal   = 2 * params * (prompt + generated)
    effective = 2 * params * (prompt - cached_prompt + generated)
where cached_prompt counts prompt tokens whose KV is reused: from the request structure
(shared prompts, append-only histories; scoring/compute.py structural_usage) where the rows
record it, so the price is the same on any engine, else as the engine reported
(`effective_basis` says which; `effective_engine` keeps the engine's). Samples served from
retrace's own request cache still count in full: the numbers describe the cost of producing
the artifact, not of this particular run; `request_cache_hits` says how many there were.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from numbers import Integral
from typing import Any

from retrace.scoring.metrics import (
    DEFAULT_BOOT,
    DEFAULT_LEVEL,
    DEFAULT_SEED,
    estimate,
    ks_for,
    maj_at_k_correct,
    pass_at_k,
)
from retrace.scoring.vote import plurality_index
from retrace.tasks.base import EXPLICIT, NO_ANSWER, SOURCES, Extraction, ruled
from retrace.util.records import Problem

VOTES = ("explicit", "any")


def safe_extraction(task: Any, text: Any, problem: Problem) -> tuple[Extraction, bool]:
    """(Extraction, failed): the task's answer and its source, or no answer.

    A task that raises on garbage text is a task bug, but one bad sample must not lose a
    whole job's score: the sample is counted wrong and the failure is counted.
    """
    if not isinstance(text, str):
        return NO_ANSWER, True
    try:
        if hasattr(task, "extract"):
            found = task.extract(text, problem)
        else:
            answer = task.extract_answer(text, problem)
            found = Extraction(answer, "statement") if answer is not None else NO_ANSWER
    except Exception:
        return NO_ANSWER, True
    return (NO_ANSWER if found.answer is None else ruled(str(found.answer), found.source, found.path)), False


def counted(found: Extraction, vote: str = "explicit") -> str | None:
    """The answer that counts under the vote rule (fallback guesses only with vote="any")."""
    if vote not in VOTES:
        raise ValueError(f"unknown scoring.vote {vote!r}; valid: {', '.join(VOTES)}")
    return found.answer if vote == "any" or found.source in EXPLICIT else None


def safe_extract(task: Any, text: Any, problem: Problem, vote: str = "explicit") -> tuple[str | None, bool]:
    """(answer that counts under `vote`, failed)."""
    found, failed = safe_extraction(task, text, problem)
    return counted(found, vote), failed


def score_problem(row: dict, problem: Problem, task: Any, vote: str = "explicit") -> dict:
    """Answers (as counted), their sources, correctness and vote of one problem's samples."""
    answers, sources, paths, truncated, errors = [], [], [], [], 0
    for sample in row["samples"]:
        found, failed = safe_extraction(task, sample.get("text"), problem)
        answers.append(counted(found, vote))
        sources.append(found.source)
        paths.append(found.path)
        truncated.append(sample.get("finish_reason") == "length")
        errors += failed
    correct = [a is not None and bool(task.is_correct(a, problem)) for a in answers]
    idx = plurality_index(answers, task.same_answer)
    chosen = (row.get("extra") or {}).get("chosen")
    out = {
        "id": problem.id,
        "answers": answers,
        "sources": sources,
        "paths": paths,
        "truncated": truncated,
        "correct": correct,
        "vote": None if idx is None else answers[idx],
        "vote_correct": idx is not None and correct[idx],
        "extract_exceptions": errors,
    }
    if chosen is not None:
        index = int(chosen) if isinstance(chosen, Integral) and not isinstance(chosen, bool) else -1
        if not 0 <= index < len(correct):
            raise ValueError(
                f"generation row for problem_id {problem.id!r}: extra.chosen must be the index of one "
                f"of its {len(correct)} samples, got {chosen!r}"
            )
        out["chosen"], out["chosen_correct"] = index, correct[index]
    return out


def method_chose(per_problem: list[dict], job: str) -> bool:
    """Whether the method chose the sample to score (`extra.chosen`) for every problem (True)
    or for none (False). A mix is refused: scoring it either way would count some problems
    by a rule their method did not use (docs/development/extending.md, "The chosen contract")."""
    without = [p["id"] for p in per_problem if "chosen" not in p]
    if 0 < len(without) < len(per_problem):
        raise ValueError(
            f"{job}: the method chose a sample (extra.chosen) for {len(per_problem) - len(without)} of "
            f"{len(per_problem)} problems but not for {len(without)} (first: {without[0]!r}); a method "
            "chooses for every row or for none"
        )
    return not without


def provenance_rates(per_problem: list[dict]) -> dict:
    """Share of samples per answer source, truncated share, and the counts behind them."""
    sources = [s for p in per_problem for s in p["sources"]]
    n = len(sources)
    return {
        "answer_sources": {k: sum(s == k for s in sources) / n for k in SOURCES},
        # how often each extraction rule fired ("statement:bold": 3, ...), most frequent first
        "answer_paths": dict(Counter(x for p in per_problem for x in p.get("paths", ())).most_common()),
        "truncated_rate": sum(t for p in per_problem for t in p["truncated"]) / n,
        "extract_errors": sum(a is None for p in per_problem for a in p["answers"]),
        "extract_exceptions": sum(p.pop("extract_exceptions") for p in per_problem),
    }


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


_TOKEN_KEYS = ("prompt_tokens", "cached_prompt_tokens", "generated_tokens")


def row_cost(row: dict, params: int) -> tuple[dict, float, float, int]:
    """(tokens, nominal FLOPs, effective FLOPs, unpriced scorer tokens) of one row: its samples,
    or `extra.compute`. A scorer whose parameter count is unknown cannot be priced: its tokens
    are counted as unpriced instead of silently adding 0 FLOPs."""
    extra = row.get("extra") or {}
    parts = extra.get("compute") or {
        "policy": {k: sum(int(s.get(k, 0)) for s in row["samples"]) for k in _TOKEN_KEYS}
    }
    scorer_params = (extra.get("scorer") or {}).get("params") or 0
    tokens, nominal, effective, unpriced = dict.fromkeys(_TOKEN_KEYS, 0), 0.0, 0.0, 0
    for part, t in parts.items():
        p = params if part == "policy" else scorer_params
        for k in _TOKEN_KEYS:
            tokens[k] += int(t.get(k, 0))
        if not p:
            unpriced += int(t.get("prompt_tokens", 0)) + int(t.get("generated_tokens", 0))
        nominal += 2 * p * (t.get("prompt_tokens", 0) + t.get("generated_tokens", 0))
        effective += (
            2
            * p
            * (t.get("prompt_tokens", 0) - t.get("cached_prompt_tokens", 0) + t.get("generated_tokens", 0))
        )
    return tokens, nominal, effective, unpriced


def token_totals(rows: list[dict], params: int) -> tuple[dict, dict, dict, int]:
    """(tokens, flops, finish_reason counts, request-cache hits) summed over every row."""
    totals, nominal, effective, hits, unpriced = dict.fromkeys(_TOKEN_KEYS, 0), 0.0, 0.0, 0, 0
    reasons: Counter = Counter()
    for row in rows:
        t, n, e, u = row_cost(row, params)
        unpriced += u
        totals = {k: totals[k] + t[k] for k in _TOKEN_KEYS}
        nominal, effective = nominal + n, effective + e
        hits += sum(bool(s.get("cache_hit", False)) for s in row["samples"])
        reasons.update(str(s.get("finish_reason")) for s in row["samples"])
    tokens = {
        "prompt": totals["prompt_tokens"],
        "cached_prompt": totals["cached_prompt_tokens"],
        "generated": totals["generated_tokens"],
        "per_problem_mean_generated": totals["generated_tokens"] / len(rows),
    }
    flops = {"nominal": int(nominal), "effective": int(effective)}
    if unpriced:  # say so rather than price them at 0
        flops["unpriced_tokens"] = unpriced
    return tokens, flops, dict(sorted(reasons.items())), hits


def structural_flops(rows: list[dict], params: int, engine: dict) -> dict:
    """FLOPs with `effective` priced from the request structure (scoring/compute.py
    structural_usage) where recorded, else the engine's; both kept, the basis named."""
    from retrace.scoring.compute import structural_usage

    shape = structural_usage(rows)
    out = {**engine, "effective_engine": engine["effective"], "effective_basis": "engine cache"}
    if shape is not None:
        out["effective"] = 2 * int(params) * (shape["prompt"] - shape["cached_prompt"] + shape["generated"])
        out["effective_basis"] = "request structure"
    return out


def k_metrics(per_problem: list[dict], same_answer: Any, n_boot: int, seed: int) -> tuple[dict, dict]:
    """maj@k (with CI) on the first k samples, and pass@k over all samples, for each k."""
    n_min = min(len(p["answers"]) for p in per_problem)
    maj, pas = {}, {}
    for k in ks_for(n_min):
        flags = [maj_at_k_correct(p["answers"], p["correct"], k, same_answer) for p in per_problem]
        maj[k] = estimate(flags, n_boot, seed)
        pas[k] = float(
            sum(pass_at_k(len(p["correct"]), sum(p["correct"]), k) for p in per_problem) / len(per_problem)
        )
    return maj, pas


def score_generations(
    rows: Iterable[dict],
    problems: dict[str, Problem],
    task: Any,
    params: int,
    n_boot: int = DEFAULT_BOOT,
    seed: int = DEFAULT_SEED,
    vote: str = "explicit",
    job: str = "generation rows",
) -> dict:
    """The score dict of one job (see module docstring); raises ValueError on bad rows, the
    ones of a job (`job`: its name in the error) whose method chose for some rows only among them."""
    rows = list(rows)
    check_rows(rows, problems)
    per_problem = [score_problem(r, problems[str(r["problem_id"])], task, vote) for r in rows]
    rates = provenance_rates(per_problem)
    tokens, flops, reasons, hits = token_totals(rows, params)
    flops = structural_flops(rows, params, flops)
    maj, pas = k_metrics(per_problem, task.same_answer, n_boot, seed)
    chosen = method_chose(per_problem, job)
    flags = [p["chosen_correct"] if chosen else p["vote_correct"] for p in per_problem]
    scorer = next((r["extra"]["scorer"] for r in rows if (r.get("extra") or {}).get("scorer")), None)
    return {
        "n_problems": len(rows),
        "n_samples": sum(len(r["samples"]) for r in rows),
        "accuracy": estimate(flags, n_boot, seed),
        "selection": "chosen by scorer" if chosen else "plurality vote",
        "vote": "explicit answers only (paper-faithful)"
        if vote == "explicit"
        else "any answer, fallback guesses included",
        "scorer": scorer,
        "maj@k": maj,
        "pass@k": pas,
        "ci": {
            "method": "percentile bootstrap over problems",
            "n_boot": n_boot,
            "seed": seed,
            "level": DEFAULT_LEVEL,
        },
        "tokens": tokens,
        "flops": flops,
        "params": params,
        "finish_reasons": reasons,
        "request_cache_hits": hits,
        **rates,
        "per_problem": per_problem,
    }


RESULT_COLUMNS = (
    *(f"answer_{k}_rate" for k in SOURCES),
    "answer_paths",
    "truncated_rate",
    "extract_errors",
    "vote_rule",
    "budget",
    "budget_tokens_per_solution",
    "mean_generated_tokens_per_solution",
)


def result_columns(score: dict) -> dict:
    """Flat columns for results.csv: answer-source rates, truncation, extraction failures,
    the vote rule, and the per-solution budget beside the mean tokens used per solution."""
    sources = score.get("answer_sources") or {}
    budget = score.get("budget") or {}
    n_sol = budget.get("solutions") or 0
    used = score["tokens"]["generated"] / (score["n_problems"] * n_sol) if n_sol else ""
    return {
        **{f"answer_{k}_rate": sources.get(k, "") for k in SOURCES},
        "answer_paths": "; ".join(f"{k}={v}" for k, v in (score.get("answer_paths") or {}).items()),
        "truncated_rate": score.get("truncated_rate", ""),
        "extract_errors": score.get("extract_errors", ""),
        "vote_rule": score.get("vote", ""),
        "budget": budget.get("text", ""),
        "budget_tokens_per_solution": budget.get("tokens_per_solution", ""),
        "mean_generated_tokens_per_solution": used,
    }
