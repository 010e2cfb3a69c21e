"""Rates per role and context (retrace.planning.rates) and how they price a job
(retrace.planning.sizing): a pilot's measurement at a long enough context, never a shorter
one; reward scoring at the reward model's own rate, undivided by its GPUs; Maj@N' bounded
with the minimum sample length."""

from __future__ import annotations

import json

import pytest

from retrace.planning import sizing
from retrace.planning.devices import reward_gpus
from retrace.planning.plan import Job, job_config
from retrace.planning.rates import REWARD_TOK_S, measured, role_rate
from retrace.scoring.compute import equal_compute_n, min_sample_tokens

MODEL = "qwen2.5-1.5b-instruct"
REFINE = (
    "method.sampling.max_tokens=4096",
    "method.n=8",
    "method.depth=4",
    "method.roles.continue.max_tokens=1024",
    "method.roles.critique.max_tokens=1024",
    "method.roles.correct.max_tokens=4096",
)
ROLES = ("sample", "continue", "critique", "correct")


def pilot(tmp_path, rates: list[dict], **fields) -> tuple:
    """A hand-written results/pilot/<model>/vllm.json beside results/probe (the probe folder
    the planner is given)."""
    path = tmp_path / "results" / "pilot" / MODEL / "vllm.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"model": MODEL, "backend": "vllm", "engine": {"tensor_parallel_size": 1}, "device": "H100"}
    path.write_text(json.dumps({**body, "measured_at": "2026-12-06T12:00:00Z", "rates": rates, **fields}))
    return tmp_path / "results" / "probe", path


def at(decode: float, context: int, roles=ROLES) -> list[dict]:
    return [
        {
            "role": r,
            "context_tokens": context,
            "decode_tok_s": decode,
            "prefill_tok_s": 10 * decode,
            "requests": 4,
        }
        for r in roles
    ]


def refine_job() -> Job:
    return Job(MODEL, "vllm", "smoke_math", "refine", "refine", 0, REFINE)


def test_a_slower_measured_rate_lengthens_the_requested_runtime(tmp_path):
    [assumed] = sizing.job_bounds([refine_job()], None)
    probe, _ = pilot(tmp_path / "fast", at(5000.0, 40_000))
    [fast] = sizing.job_bounds([refine_job()], None, probe_dir=probe)
    probe, _ = pilot(tmp_path / "slow", at(500.0, 40_000))
    [slow] = sizing.job_bounds([refine_job()], None, probe_dir=probe)
    assert (assumed.rates, fast.rates, slow.rates) == ("assumed", "measured by pilot", "measured by pilot")
    assert fast.minutes() < assumed.minutes() < slow.minutes()  # stated: 2,500 tok/s
    assert {d[5] for d in slow.rate_detail} == {f"pilot ({r} @ 40,000)" for r in ROLES}


def test_a_rate_measured_at_a_shorter_context_never_prices_a_longer_role(tmp_path):
    rates = at(9000.0, 2_000) + at(700.0, 30_000, ("correct",)) + at(800.0, 60_000, ("correct",))
    assert measured(rates, "correct", 25_000)["decode_tok_s"] == 700.0  # the nearest long enough
    assert measured(rates, "correct", 40_000)["decode_tok_s"] == 800.0
    assert measured(rates, "continue", 25_000) is None
    probe, _ = pilot(tmp_path, rates)
    [b] = sizing.job_bounds([refine_job()], None, probe_dir=probe)
    by_role = {d[1]: d for d in b.rate_detail}
    assert by_role["sample"][5] == "pilot (sample @ 2,000)"  # smoke_math's prompts are short
    assert by_role["continue"][5] == "assumed" and by_role["continue"][2] > 2_000
    assert by_role["correct"][3] == 700.0


def test_the_probe_prices_short_contexts_only(tmp_path):
    (tmp_path / MODEL).mkdir()
    (tmp_path / MODEL / "vllm.json").write_text(json.dumps({"tok_s": 100.0}))
    cfg = job_config(refine_job())
    assert role_rate(cfg, tmp_path, MODEL, "vllm", "sample", 300).source == "measured by probe"
    assert role_rate(cfg, tmp_path, MODEL, "vllm", "correct", 20_000).source == "assumed"


@pytest.mark.parametrize(
    "fields, says",
    [
        ({"model": "llama-3.1-8b-instruct"}, "model 'llama-3.1-8b-instruct'"),
        ({"engine": {"tensor_parallel_size": 2}}, "tensor_parallel_size 2"),
    ],
)
def test_a_pilot_of_another_model_or_engine_is_ignored_in_one_line(tmp_path, capsys, fields, says):
    probe, path = pilot(tmp_path, at(100.0, 40_000), **fields)
    [b] = sizing.job_bounds([refine_job()], None, probe_dir=probe)
    assert b.rates == "assumed"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and says in err[0] and err[0].endswith("ignored")


def rm_job(*extra: str) -> Job:
    over = ("method.sampling.max_tokens=1024", "method.n=8", "backend.engine.max_model_len=4096", *extra)
    return Job("qwen2.5-math-7b", "vllm", "smoke_math", "best_of_n", "best_of_n_qwen_rm", 0, over)


def test_reward_scoring_is_priced_at_the_reward_models_rate_undivided_by_its_gpus():
    job = rm_job()
    cfg = job_config(job)
    [b] = sizing.job_bounds([job], None)
    assert b.gpus == 3 and reward_gpus(cfg) == 2  # tensor parallel 1 + the reward model's 2
    detail = {d[1]: d for d in b.rate_detail}
    _, _, _, decode, prefill, _ = detail["sample"]
    policy = b.tokens.generated / decode + (b.tokens.computed - b.tokens.generated) / prefill  # on 1 GPU
    rate = REWARD_TOK_S * 8e9 / cfg["method"]["scorer"]["params"]  # 72B: ~9x slower than the 8B stated
    assert detail["reward"][0] == "Qwen/Qwen2.5-Math-RM-72B" and detail["reward"][3] == pytest.approx(rate)
    assert b.work_s == pytest.approx(policy + b.tokens.reward / rate)
    assert b.minutes() >= (policy + b.tokens.reward / rate) * sizing.SAFETY / 60


def test_maj_n_prime_cannot_exceed_its_bound_however_short_the_samples():
    refine_usage = {"prompt": 900_000, "cached_prompt": 0, "generated": 600_000}
    short = {"prompt": 8 * 30 * 100, "cached_prompt": 0, "generated": 8 * 30 * 5}  # 5-token samples
    m = {"sampling": {"max_tokens": 4096}}
    floor = min_sample_tokens(m)
    assert floor == 256
    free = equal_compute_n(refine_usage, short, 8, 1, "nominal")
    capped = equal_compute_n(refine_usage, short, 8, 1, "nominal", samples=8 * 30, min_generated=floor)
    assert capped["floored"] and not free["floored"] and capped["n_prime"] < free["n_prime"]
    assert capped["n_prime"] <= 8 + (1_500_000 - 8 * 30 * floor) * 8 // (8 * 30 * floor)


def test_the_paper_estimate_prints_each_rate_with_its_source_and_the_load_share(tmp_path):
    from retrace.planning import parts
    from retrace.planning.cluster import Limit
    from retrace.planning.estimate import load_share_line, rate_lines
    from retrace.planning.plan import jobs

    path = tmp_path / "results" / "pilot" / "qwen2.5-math-7b" / "vllm.json"
    path.parent.mkdir(parents=True)
    body = {"model": "qwen2.5-math-7b", "backend": "vllm", "engine": {}, "device": "H100"}
    rates = at(3000.0, 8_192) + [{"role": "reward", "context_tokens": 4_096, "prefill_tok_s": 900.0}]
    path.write_text(json.dumps({**body, "measured_at": "2026-12-06T12:00:00Z", "rates": rates}))
    s = parts.sized(jobs({"experiment": "paper"}), None, (), tmp_path / "results" / "probe", Limit(1440, 4))
    lines = {line.split(":")[0]: line for line in rate_lines(s)}
    assert "rates Qwen/Qwen2.5-Math-RM-72B" in lines and "rates qwen2.5-1.5b-instruct" in lines
    assert (
        "reward ≤ 2,048 prompt tokens: 900 tok/s read (pilot (reward @ 4,096))"
        in lines["rates Qwen/Qwen2.5-Math-RM-72B"]
    )
    assert (
        "correct ≤ 7,248 prompt tokens: 3,000 tok/s decode, 30,000 tok/s prefill (pilot (correct @ 8,192))"
        in lines["rates qwen2.5-math-7b"]
    )
    assert lines["rates qwen2.5-1.5b-instruct"].count("(assumed)") == 4  # sample, continue, critique, correct
    share = load_share_line(s)
    assert share.startswith("engine-load share of GPU time: ") and " % (" in share


def test_a_pilot_prices_the_parts_but_never_moves_a_label(tmp_path):
    """As the probe's (tests/unit/test_parts.py): a job's own Snakemake must find its DAG."""
    from retrace.planning import parts
    from retrace.planning.cluster import Limit
    from retrace.planning.plan import jobs

    planned = jobs({"experiment": "paper"})
    probe, _ = pilot(tmp_path, at(50.0, 60_000))
    stated, piloted = (
        parts.sized(planned, None, limit=Limit(1440, 4)),
        parts.sized(planned, None, (), probe, Limit(1440, 4)),
    )
    assert [p.part for p in piloted.parts] == [p.part for p in stated.parts]
    mine = [p for p in piloted.parts if p.part.cell[0] == MODEL]
    assert sum(p.work_s for p in mine) > 10 * sum(p.work_s for p in stated.parts if p.part.cell[0] == MODEL)
