"""Compute accounting: FLOPs from measured token counts, and the equal-compute N' for Maj@N'.

FLOPs use the forward-pass approximation 2 x params per token (Kaplan et al. 2020,
"Scaling Laws for Neural Language Models", https://arxiv.org/abs/2001.08361, sec. 2.1),
which ignores the attention term, as the refinement paper's sec. 3.5 does:
    nominal   = 2 * params * (prompt + generated)
    effective = 2 * params * (prompt - cached_prompt + generated)
`cached_prompt` counts prompt tokens whose KV can be reused. Two sources:
- the engine's report (what its prefix cache happened to hold during this run: it depends on
  slots, batch order and eviction, so two engines price the same requests differently);
- `structural_usage`: what ideal prefix reuse saves given the REQUEST STRUCTURE alone, the
  same on any engine. The N samples of a problem share one prompt (computed once); a
  refinement rollout's calls are append-only, so every prompt is a prefix of the rollout's
  final history (`context_tokens`), computed once. Per problem:
      computed = P0 + sum over rollouts i of (context_i - P0)
  with P0 the shared question prompt; cached_prompt = (prompt + generated) - computed.
  With `history: latest` a rollout is D chains (`refine_chains`), each restarting from the
  question: the sum then runs over every chain of every rollout.
  Rows whose structure is not recorded (search methods' pruned candidates and judge calls)
  are not covered: `structural_usage` returns None for them and callers fall back to the
  engine's count, saying so.

Equal-compute resampling (the skeptic's concrete test in the review of arXiv:2608.05643):
    per_rollout = C_MajN / N                      cost of one more sample for every problem
    N' = floor((C_refine - C_MajN) / per_rollout) + N, and N' = N when refinement is cheaper
Maj@N' is then the `majority` method with method.n = N' (its first N samples are the stored
Maj@N set, served from the request cache). Both costs must cover the same problems.

Token counts are accepted in either stored form: a score's "tokens" block
({"prompt", "cached_prompt", "generated"}) or a generation's provenance "usage"
({"prompt_tokens_all", "cached_prompt_tokens_all", "generated_tokens_all"}).
This does not cover the cost of scoring (extraction, reward models) or of cache look-ups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

KINDS = ("nominal", "effective")
_FORMS = (
    ("prompt", "cached_prompt", "generated"),
    ("prompt_tokens_all", "cached_prompt_tokens_all", "generated_tokens_all"),
)


def token_counts(usage: Mapping) -> tuple[int, int, int]:
    """(prompt, cached_prompt, generated) from a score "tokens" block or a provenance "usage"."""
    for keys in _FORMS:
        if keys[0] in usage and keys[2] in usage:
            return int(usage[keys[0]]), int(usage.get(keys[1], 0)), int(usage[keys[2]])
    raise ValueError(f"no token counts in {sorted(usage)}; expected {_FORMS[0]} or {_FORMS[1]}")


def flops(usage: Mapping, params: int, kind: str = "effective") -> int:
    """Total forward FLOPs of `usage` (see module docstring for the two kinds)."""
    if kind not in KINDS:
        raise ValueError(f"unknown FLOP kind {kind!r}; valid: {', '.join(KINDS)}")
    prompt, cached, generated = token_counts(usage)
    if not 0 <= cached <= prompt:
        raise ValueError(f"cached prompt tokens ({cached}) must lie in 0..prompt ({prompt})")
    counted = prompt + generated if kind == "nominal" else prompt - cached + generated
    return 2 * int(params) * counted


# The minimum sample length N' is priced with lives beside the other budgets (retrace.methods.budget),
# where sizing (planning) reads it too.
from retrace.methods.budget import MIN_SAMPLE_DIVISOR as MIN_SAMPLE_DIVISOR  # noqa: E402
from retrace.methods.budget import min_sample_tokens as min_sample_tokens  # noqa: E402


def floored(usage: Mapping, samples: int, min_generated: int) -> dict:
    """`usage` as (prompt, cached_prompt, generated) with its generated tokens at least
    samples x min_generated (what each sample counts as, at least)."""
    prompt, cached, generated = token_counts(usage)
    return {"prompt": prompt, "cached_prompt": cached, "generated": max(generated, samples * min_generated)}


def equal_compute_n(
    refine_usage: Mapping,
    majority_usage: Mapping,
    n: int,
    params: int,
    kind: str = "effective",
    samples: int = 0,
    min_generated: int = 0,
) -> dict:
    """N' such that Maj@N' costs about what refinement cost (never less than N), each of Maj@N's
    `samples` samples counted as at least `min_generated` tokens (min_sample_tokens).

    Returns {"kind", "n", "n_prime", "c_refine", "c_majority", "per_rollout", "extra_rollouts",
    "ratio", "floored"} where ratio = C_refine / C_MajN and costs are FLOPs over all problems.
    """
    if n < 1:
        raise ValueError(f"Maj@N needs n >= 1, got {n}")
    floor = floored(majority_usage, samples, min_generated)
    c_refine, c_maj = flops(refine_usage, params, kind), flops(floor, params, kind)
    if c_maj <= 0:
        raise ValueError("Maj@N cost is zero: no measured tokens to price a rollout with")
    per_rollout = c_maj / n
    # Integer floor division on exact FLOP counts: no float rounding at the boundary.
    extra = max(0, (c_refine - c_maj) * n // c_maj)
    return {
        "kind": kind,
        "n": n,
        "n_prime": n + extra,
        "c_refine": c_refine,
        "c_majority": c_maj,
        "per_rollout": per_rollout,
        "extra_rollouts": extra,
        "ratio": c_refine / c_maj,
        "floored": floor["generated"] > token_counts(majority_usage)[2],
    }


def compute_normalised_gain(
    acc: float, acc_base: float, flops_: float, flops_base: float, n_problems: int = 1
) -> float | None:
    """Accuracy points gained per 10^3 TFLOPs (10^15 FLOPs) spent over the baseline PER PROBLEM.

    The paper's units (sec. 5.3, Table 4: ΔTFLOPs per problem, eta in points per 10^3 TFLOPs):
    `flops_` are dataset totals, divided by `n_problems` here. `acc` values are fractions
    (0..1); None when the method spent no more than the baseline, where the ratio is
    meaningless (the paper's eta assumes extra spend).
    """
    extra = (flops_ - flops_base) / n_problems
    if extra <= 0:
        return None
    return 100.0 * (acc - acc_base) / (extra / 1e15)


def _row_structure(row: Mapping) -> tuple[int, list[int]] | None:
    """(shared question prompt P0, final context length of each rollout), or None."""
    extra = row.get("extra") or {}
    samples = row["samples"]
    if "compute" in extra:
        return None  # search / scored rows: candidates and judge calls are not recorded per call
    depths = extra.get("depths")
    if depths:
        recs = [rec for depth in refine_chains(extra) for rec in depth]
        if any("context_tokens" not in rec for rec in recs):
            return None
        return int(min(rec["prompt_tokens"] for rec in depths[0])), [
            int(rec["context_tokens"]) for rec in recs
        ]
    return int(min(s["prompt_tokens"] for s in samples)), [
        int(s["prompt_tokens"]) + int(s["generated_tokens"]) for s in samples
    ]


def refine_chains(extra: Mapping) -> list:
    """The depth records that end one append-only chain of calls per rollout. With the full
    history (methods/refine.py) a rollout is one chain, ended by its last depth. With
    `history: latest` every round restarts from the question and the previous trace: round 1
    extends the sample's chain (depth 0 shares it), each later round is a chain of its own
    that shares only the question prompt P0 (the previous trace is recomputed as prompt)."""
    depths = extra["depths"]
    if extra.get("history") == "latest" and len(depths) > 1:
        return depths[1:]
    return depths[-1:]


def structural_usage(rows: Sequence[Mapping]) -> dict | None:
    """{"prompt", "cached_prompt", "generated"} over `rows`, with cached_prompt from the request
    structure (module docstring); None when some row's structure is not recorded."""
    prompt = generated = computed = 0
    for row in rows:
        shape = _row_structure(row)
        if shape is None:
            return None
        p0, contexts = shape
        prompt += sum(int(s["prompt_tokens"]) for s in row["samples"])
        generated += sum(int(s["generated_tokens"]) for s in row["samples"])
        computed += p0 + sum(c - p0 for c in contexts)
    return {"prompt": prompt, "cached_prompt": prompt + generated - computed, "generated": generated}


def depth_tokens(rows: list[dict]) -> list[dict]:
    """Per depth d of refine rows: tokens of all rollouts refined to depth d (cumulative).

    A refinement stopped at depth d has cost exactly depths[d]'s cumulative counts, so
    this gives the compute axis of the N x D grid and of accuracy-vs-compute plots.
    """
    n_depths = min(len(r["extra"]["depths"]) for r in rows)
    out = []
    for d in range(n_depths):
        recs = [rec for r in rows for rec in r["extra"]["depths"][d]]
        out.append(
            {
                "depth": d,
                "prompt": sum(x["prompt_tokens"] for x in recs),
                "cached_prompt": sum(x["cached_prompt_tokens"] for x in recs),
                "generated": sum(x["generated_tokens"] for x in recs),
            }
        )
    return out


def flops_summary(usage: Mapping, params: int) -> dict:
    """{"nominal", "effective"} FLOPs and the same in TFLOPs, for tables."""
    out: dict[str, float] = {kind: flops(usage, params, kind) for kind in KINDS}
    out.update({f"{kind}_tflops": out[kind] / 1e12 for kind in KINDS})
    return out
