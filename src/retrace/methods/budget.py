"""Each method's per-solution generation budget, from its config (not from what it used).

    solution_budget(job.config()["method"]) -> {"solutions": 8, "tokens_per_solution": 4096,
                                                "text": "N=8 x 4096 tok"}

What a "solution" is: a sampled rollout (greedy, Maj@N, RM@N: `sampling.max_tokens`), a
refined terminal trace (refinement: its final answer is written by the `correct` role, so
that role's budget; with critic=none too), or a search path (beam/lookahead: `max_steps` x
the per-step `sampling.max_tokens`). Comparing methods fairly needs each baseline's budget
to be at least refinement's final-answer budget (retrace plan --check tests it).
"""

from __future__ import annotations


def role_tokens(cfg: dict, role: str) -> int:
    """max_tokens of a refinement role (null = the `sampling` block's)."""
    changed = ((cfg.get("roles") or {}).get(role) or {}).get("max_tokens")
    return int(changed if changed is not None else cfg["sampling"]["max_tokens"])


def solution_budget(cfg: dict, n_solutions: int | None = None) -> dict:
    """{"solutions", "tokens_per_solution", "text"}; `n_solutions` overrides N (Maj@N' priced
    at run time) for sampling methods; a search's solutions are its width, as configured."""
    name = cfg["name"]
    if name in ("beam", "lookahead"):
        n, per = int(cfg["width"]), int(cfg["max_steps"]) * int(cfg["sampling"]["max_tokens"])
        text = f"width {n}, {cfg['max_steps']} steps x {cfg['sampling']['max_tokens']} = {per} tok"
        n_solutions = None
    elif name == "refine":
        n, per = int(cfg["n"]), role_tokens(cfg, "correct")
        text = f"N={n}, D={cfg['depth']}, {per} tok final answer"
    elif name == "greedy":  # one sample per problem: greedy.yaml has no `n`
        n, per, text = 1, int(cfg["sampling"]["max_tokens"]), None
    else:  # a sampling method: its YAML states `n` (read only when N is not given as run)
        n = n_solutions if n_solutions is not None else int(cfg["n"])
        per, text = int(cfg["sampling"]["max_tokens"]), None
    n = int(n_solutions) if n_solutions is not None else n
    return {"solutions": n, "tokens_per_solution": per, "text": text or f"N={n} x {per} tok"}


MIN_SAMPLE_DIVISOR = 16  # the minimum sample length N' is priced with: max_tokens / this


def min_sample_tokens(method: dict) -> int:
    """The length every Maj@N sample counts as at least when N' is priced (`method.
    min_sample_tokens`, else max_tokens / MIN_SAMPLE_DIVISOR): without a floor, samples far
    shorter than their cap would make N' unbounded, and no job could be sized before it ran.
    Where Maj@N's samples are shorter than this on average, Maj@N' spends less than refinement
    (`floored` in the pricing record says so)."""
    stated = method.get("min_sample_tokens")
    if stated:
        return int(stated)
    return max(1, -(-int(method["sampling"]["max_tokens"]) // MIN_SAMPLE_DIVISOR))
