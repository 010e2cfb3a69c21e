"""`retrace pilot` (retrace.app.pilot): which roles it measures at which lengths, what it writes,
and that the grid it re-sizes lengthens with a slower measured rate. The engine here is the
scripted fake (token = word); test_pilot_llamacpp.py runs the real command on the tests' model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrace.app import pilot
from retrace.app.launch import global_config
from retrace.app.pilot_roles import Engine, RoleLoad, experiment_loads, fit
from retrace.store.provenance import prov_path
from tests.unit.fake_backend import manifest

CONFIG = Path(__file__).resolve().parents[2] / "config" / "config.yaml"


def paper_loads(monkeypatch) -> dict:
    monkeypatch.delenv("RETRACE_MIRROR", raising=False)  # a clone alone: the default question length
    return experiment_loads(global_config(CONFIG, "paper", ["mirror=/nonexistent"]))


def test_refinement_is_measured_at_its_deepest_round_and_samples_at_full_length(monkeypatch):
    loads = paper_loads(monkeypatch)
    full, latest = (
        loads[("qwen2.5-1.5b-instruct", "vllm")].roles,
        loads[("llama-3.1-8b-instruct", "vllm")].roles,
    )
    # each call of the deepest round reads what the round wrote before it
    assert latest["sample"].context < latest["continue"].context < latest["critique"].context
    assert latest["critique"].context < latest["correct"].context
    # the whole-history ablation (refine_full, only on qwen2.5-1.5b) reaches ~25k tokens, and its
    # continue is measured there, not at the latest-trace refinement's ~5k
    assert full["continue"].context > 4 * latest["continue"].context and full["correct"].context > 20_000
    # Maj@N (and Maj@N', drawn alike) sample the whole 4,096-token cap; the correction its own cap
    assert latest["sample"].max_tokens == 4096 and latest["correct"].max_tokens == 4096
    assert latest["continue"].max_tokens == 1024
    # search steps are their own role: a 256-token step is not priced as a 4,096-token sample
    assert latest["step"].max_tokens == 256
    # the engine takes the longest context and the smallest memory share any of its jobs asks
    engine = loads[("qwen2.5-math-7b", "vllm")].backend_cfg["engine"]
    assert engine["max_model_len"] == 4096 and engine["gpu_memory_utilization"] == 0.6


def test_rm_at_n_measures_the_real_reward_model_at_a_rollouts_length(monkeypatch):
    roles = paper_loads(monkeypatch)[("qwen2.5-math-7b", "vllm")].roles
    reward = roles["reward"]
    assert reward.scorer["repo"] == "Qwen/Qwen2.5-Math-RM-72B" and reward.max_tokens == 0
    assert reward.context == roles["sample"].context + 1024  # the question and one 1,024-token rollout


def test_drr_and_art_measure_their_own_roles_at_their_longest_turn(monkeypatch):
    monkeypatch.delenv("RETRACE_MIRROR", raising=False)
    drr = experiment_loads(global_config(CONFIG, "drr_paper", ["mirror=/nonexistent"]))
    reasoner = drr[("llama-3.1-8b-instruct", "vllm")].roles["drr"]
    # the last of up to 5 turns: four 512-token replies and their feedback before it
    assert reasoner.max_tokens == 512 and reasoner.context > 4 * 512
    art = experiment_loads(global_config(CONFIG, "art_paper", ["mirror=/nonexistent"]))
    segment = art[("qwen2.5-coder-1.5b-q4km", "llamacpp")].roles["art"]
    assert segment.max_tokens == 160 and segment.context > 5000  # demonstrations and earlier steps


def test_a_role_longer_than_the_engine_context_is_clipped_to_fit():
    load = RoleLoad("correct", 5000, 1000)
    assert fit(load, 4096).context + 1000 <= 4096 and fit(load, None) == load and fit(load, 8192) == load


def scripted_engine(roles: dict[str, RoleLoad], **engine) -> Engine:
    cfg = {"name": "scripted", "engine": {"script": [" ".join(["w"] * 64)], "batch_size": 4, **engine}}
    return Engine("fake-model", "scripted", cfg, roles)


def results_with_manifest(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    (results / "models" / "fake-model").mkdir(parents=True)
    (results / "models" / "fake-model" / "manifest.json").write_text(json.dumps(manifest()))
    return results


def test_each_role_is_measured_at_its_context_and_written_with_provenance(tmp_path):
    results = results_with_manifest(tmp_path)
    roles = {"sample": RoleLoad("sample", 300, 20), "correct": RoleLoad("correct", 900, 12)}
    out = pilot.pilot_engine(scripted_engine(roles), results, results / "pilot", 3, None)
    assert out == results / "pilot" / "fake-model" / "scripted.json"
    result = json.loads(out.read_text())
    assert (result["model"], result["backend"], result["device"]) == ("fake-model", "scripted", "cpu")
    by_role = {r["role"]: r for r in result["rates"]}
    # the calibrated number lists reach each role's context (scripted: one token a word)
    assert (
        abs(by_role["sample"]["context_tokens"] - 300) <= 2
        and abs(by_role["correct"]["context_tokens"] - 900) <= 2
    )
    # every request ran to the role's whole cap
    assert by_role["sample"]["generated_tokens"] == 3 * 20 and by_role["correct"]["full_share"] == 1.0
    assert all(
        r["requests"] == 3 and r["decode_tok_s"] > 0 and r["prefill_tok_s"] > 0 for r in result["rates"]
    )
    assert result["tok_s"] == min(r["decode_tok_s"] for r in result["rates"])
    record = json.loads(prov_path(out).read_text())
    assert record["stage"] == "pilot" and record["model"]["fingerprint"] == manifest()["fingerprint"]
    assert any("app/pilot.py" in s for s in record["code"]["sources"])


def test_requests_stop_at_the_engines_slots_and_decode_tokens_cap_the_output(tmp_path):
    results = results_with_manifest(tmp_path)
    engine = scripted_engine({"sample": RoleLoad("sample", 50, 40)}, batch_size=2)
    out = pilot.pilot_engine(engine, results, results / "pilot", 8, 5)
    (rate,) = json.loads(out.read_text())["rates"]
    assert rate["requests"] == 2 and rate["max_tokens"] == 5 and rate["generated_tokens"] == 10


def test_an_engine_that_fails_is_one_line_and_the_models_measured_before_keep_theirs(tmp_path):
    results = results_with_manifest(tmp_path)
    roles = {"sample": RoleLoad("sample", 40, 4)}
    kept = pilot.pilot_engine(scripted_engine(roles), results, results / "pilot", 2, None)
    before = kept.read_text()
    broken = Engine(
        "fake-model", "other", {"name": "scripted", "engine": {"script": ["x"], "fail_on_call": 2}}, roles
    )
    with pytest.raises(
        ValueError, match=r"^pilot: fake-model on other failed while measuring: BackendError"
    ) as e:
        pilot.pilot_engine(broken, results, results / "pilot", 2, None)
    assert "\n" not in str(e.value)
    assert kept.read_text() == before and not (results / "pilot" / "fake-model" / "other.json").exists()


def test_a_missing_manifest_names_the_command_that_makes_it(tmp_path):
    with pytest.raises(ValueError, match=r"no manifest at .*snakemake --cores 1"):
        pilot.pilot_engine(scripted_engine({}), tmp_path, tmp_path / "pilot", 2, None)


def write_pilot(folder: Path, cfg: dict, decode: float) -> None:
    for (model, backend), engine in experiment_loads(cfg).items():
        rates = [
            {
                "role": r.role,
                "context_tokens": r.context,
                "max_tokens": r.max_tokens,
                "requests": 8,
                "decode_tok_s": decode,
                "prefill_tok_s": 10 * decode,
            }
            for r in engine.roles.values()
        ]
        result = {
            "model": model,
            "backend": backend,
            "engine": {},
            "device": "NVIDIA H100",
            "measured_at": "",
            "rates": rates,
            "tok_s": decode,
            "prefill_tok_s": 10 * decode,
        }
        (folder / model).mkdir(parents=True, exist_ok=True)
        (folder / model / f"{backend}.json").write_text(json.dumps(result))


def test_a_slower_measured_rate_lengthens_the_requested_runtimes(tmp_path, monkeypatch):
    from retrace.planning.cluster import Limit
    from retrace.planning.parts import sized
    from retrace.planning.plan import jobs

    monkeypatch.delenv("RETRACE_MIRROR", raising=False)
    # 30 questions a dataset: a size known from a clone alone (the limit)
    cfg = global_config(CONFIG, "paper", ["mirror=/nonexistent", "dataset.limit=30"])
    planned, dso = jobs(cfg), ("dataset.limit=30",)
    runtimes = {}
    for name, rate in (("fast", 4000.0), ("slow", 1000.0)):
        write_pilot(tmp_path / name / "pilot", cfg, rate)  # read beside the probe's folder
        parts = sized(planned, None, dso, tmp_path / name / "probe", Limit(None, 4)).parts
        runtimes[name] = [p.as_dict(Limit(None, 4))["runtime_min"] for p in parts]
    assert None not in runtimes["fast"]
    assert all(s > f for s, f in zip(runtimes["slow"], runtimes["fast"], strict=True))


def test_plan_check_says_when_no_pilot_has_run_and_refuses_another_engines_result(tmp_path, monkeypatch):
    from retrace.planning.pilot_check import pilot_lines

    monkeypatch.delenv("RETRACE_MIRROR", raising=False)
    cfg = global_config(CONFIG, "paper", ["mirror=/nonexistent"])
    lines = pilot_lines(cfg, tmp_path)
    assert len(lines) == 4 and not any(fails for _, fails in lines)  # a note per GPU engine
    assert lines[0][0].startswith("no pilot has run for qwen2.5-1.5b-instruct on vllm: its rates are assumed")
    assert "retrace pilot --experiment paper" in lines[0][0]
    write_pilot(tmp_path, cfg, 2000.0)
    assert pilot_lines(cfg, tmp_path) == []  # every engine measured
    # a result copied from another model's folder, and one that is not a pilot result at all
    own = tmp_path / "qwen2.5-math-7b" / "vllm.json"
    own.write_text((tmp_path / "llama-3.1-8b-instruct" / "vllm.json").read_text())
    (tmp_path / "ministral-8b-instruct" / "vllm.json").write_text("{}")
    ((why, fails), (bad, fails2)) = pilot_lines(cfg, tmp_path)
    assert fails and fails2 and "\n" not in why + bad
    assert why.startswith(f"{tmp_path}/ministral-8b-instruct/vllm.json: not a pilot result")
    assert (
        bad
        == f"{own}: measured llama-3.1-8b-instruct on vllm, not qwen2.5-math-7b on vllm; run `retrace pilot` again"
    )
