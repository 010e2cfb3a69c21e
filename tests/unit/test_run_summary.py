"""The run summary (retrace.report.run_summary) and the probe stage that gives it the raw rate."""

from __future__ import annotations

import json

import pytest
from fake_backend import manifest

from retrace.backends.scripted import ScriptedBackend
from retrace.report.html import render_html
from retrace.report.run_summary import run_summary
from retrace.stages import probe


def node(stage, seconds, generated, model="m", backend="llamacpp", label=None, **extra):
    rec = {
        "stage": stage,
        "model": {"name": model},
        "engine": {"name": backend},
        "usage": {
            "engine_seconds": seconds,
            "engine_generated_tokens": generated,
            "engine_prompt_tokens": 10 * generated,
        },
        **extra,
    }
    if label:
        rec["job"] = {"label": label, "backend": backend}
    return {"rec": rec}


def probe_file(tmp_path, model, backend, tok_s, prefill_tok_s=None):
    path = tmp_path / f"{model}-{backend}.json"
    path.write_text(
        json.dumps({"model": model, "backend": backend, "tok_s": tok_s, "prefill_tok_s": prefill_tok_s})
    )
    return path


def test_rows_per_stage_each_job_once_and_weighted_efficiency(tmp_path):
    drr = node("drr.generate", 30.0, 600)
    nodes = {
        "a": node("generate", 10.0, 500, label="majority"),
        "b": node("generate", 10.0, 300, label="majority"),
        "c": node("generate", 40.0, 800, label="refine"),
        "d": drr,
        "e": json.loads(json.dumps(drr)),  # one run, two artifacts
        "f": node("generate", 5.0, 99, label="refine", shard={"index": 0, "of": 2}),
        "g": node("generate", 0.0, 0, label="greedy"),  # all from the cache
        "h": node("art.run", 20.0, 100, model="other"),  # no probe for this model
        "i": {"rec": {"stage": "score"}},
    }
    rows, total = run_summary(nodes, [probe_file(tmp_path, "m", "llamacpp", 50.0)])
    by = {r["stage"]: r for r in rows}
    assert set(by) == {"generate · majority", "generate · refine", "drr.generate", "art.run"}
    assert (by["generate · majority"]["jobs"], by["generate · majority"]["records"]) == (2, ["a", "b"])
    assert by["generate · majority"]["tok_s"] == pytest.approx(40.0)
    assert by["generate · majority"]["efficiency"] == pytest.approx(0.8)
    assert by["drr.generate"]["jobs"] == 1 and by["drr.generate"]["efficiency"] == pytest.approx(0.4)
    assert by["art.run"]["efficiency"] is None and by["art.run"]["raw_tok_s"] is None
    assert total["engine_seconds"] == pytest.approx(110.0) and total["generated_tokens"] == 2300
    # engine-seconds weighted over the probed rows: (800/50 + 800/50 + 600/50) / (20 + 40 + 30)
    assert total["efficiency"] == pytest.approx((16 + 16 + 12) / 90)


def test_work_efficiency_credits_prompt_processing_not_served_from_the_kv_cache(tmp_path):
    art = node("art.run", 20.0, 100)  # 1,000 prompt tokens, 400 of them KV-cached
    art["rec"]["usage"]["engine_cached_prompt_tokens"] = 400
    rows, total = run_summary({"a": art}, [probe_file(tmp_path, "m", "llamacpp", 10.0, prefill_tok_s=100.0)])
    (row,) = rows
    assert row["efficiency"] == pytest.approx(0.5)  # 5 tok/s of a raw 10: prompt work ignored
    assert row["ideal_seconds"] == pytest.approx(100 / 10 + 600 / 100)
    assert row["work_efficiency"] == pytest.approx(16 / 20) == pytest.approx(total["work_efficiency"])
    rows, total = run_summary({"a": art}, [probe_file(tmp_path, "m", "llamacpp", 10.0)])  # no prefill rate
    assert rows[0]["work_efficiency"] is None and total["work_efficiency"] is None


def test_engine_load_time_is_summed_apart_from_engine_seconds(tmp_path):
    a, b = node("generate", 10.0, 500, label="majority"), node("art.run", 5.0, 100)
    a["rec"]["usage"]["engine_load_seconds"] = 2.5
    b["rec"]["usage"]["engine_load_seconds"] = 1.0
    rows, total = run_summary({"a": a, "b": b, "c": node("generate", 3.0, 30, label="greedy")}, [])
    assert {r["stage"]: r["load_seconds"] for r in rows} == {
        "generate · majority": 2.5,
        "art.run": 1.0,
        "generate · greedy": 0.0,
    }
    assert total["load_seconds"] == pytest.approx(3.5) and total["engine_seconds"] == pytest.approx(18.0)


def test_the_llm_handle_times_the_engine_load_once(tmp_path):
    import time

    from retrace.engine.llm import CachedLLM
    from retrace.store.cache import RequestCache

    def slow_factory():
        time.sleep(0.05)
        return ScriptedBackend(manifest(), {"script": ["x"]})

    llm = CachedLLM(slow_factory, "scripted", manifest(), RequestCache(tmp_path / "cache"))
    llm.backend, llm.backend
    assert llm.usage.engine_loads == 1 and llm.usage.engine_load_seconds >= 0.05


def test_the_report_shows_the_summary_with_links():
    nodes = {"a" * 64: node("generate", 10.0, 500, label="majority")}
    rows, total = run_summary(nodes, [])
    html = render_html([], [], engine={"rows": rows, "total": total}, pages={"a" * 64: "prov/aaaa.html"})
    table = html[html.index('id="engine-table"') :]
    assert "generate · majority" in table and 'href="prov/aaaa.html"' in table and "50.0" in table


def test_probe_times_one_full_decode_batch_and_one_prefill_batch():
    engine = ScriptedBackend(manifest(), {"script": ["21 22 23 24 25 26 27 28 29 30"], "batch_size": 6})
    result = probe.measure(engine, tokens=4)
    assert result["requests"] == 6 and result["max_tokens"] == 4
    assert result["generated_tokens"] == 6 * 4 and result["full_share"] == 1.0  # each ran to its budget
    # the decode prompts for a few tokens (their prefill, untimed), decode, prefill
    assert engine.calls == 3 and len(engine.requests_seen) == 6 + 6 + 4
    warm, decode, prefill = engine.requests_seen[:6], engine.requests_seen[6:12], engine.requests_seen[12:]
    assert [r.messages for r in warm] == [r.messages for r in decode] and all(
        r.sampling.max_tokens < 8 for r in warm
    )
    assert len({r.sampling.seed for r in decode}) == 6 and len({r.messages for r in decode}) == 6
    assert all(r.continue_final and r.messages[-1].role == "assistant" for r in decode)
    assert all(r.sampling.ignore_eos for r in decode) and not any(r.sampling.ignore_eos for r in prefill)
    texts = [r.messages[0].content for r in prefill]
    assert len(set(texts)) == 4 and all(r.sampling.max_tokens == 1 for r in prefill)
    # long prompts: at least one scripted token per listed number
    assert result["prefill_tokens"] >= 4 * probe.PREFILL_NUMBERS and result["prefill_tok_s"] > 0
    assert 0 <= result["decode_cached_share"] <= 1


def test_probe_prefill_is_a_few_prompts_even_on_a_wide_engine():
    engine = ScriptedBackend(manifest(), {"script": ["21 22 23 24"], "batch_size": 64})
    result = probe.measure(engine, tokens=2)
    assert result["requests"] == 64 and result["prefill_requests"] == probe.PREFILL_REQUESTS
    assert len(engine.requests_seen) == 2 * 64 + probe.PREFILL_REQUESTS


def test_probe_reports_a_batch_that_did_not_stay_full():
    engine = ScriptedBackend(manifest(), {"script": ["21 22"], "batch_size": 4})
    result = probe.measure(engine, tokens=8)
    assert result["full_share"] == 0.0 and result["generated_tokens"] < 4 * 8


def test_drr_records_name_their_backend_so_the_summary_rates_them(tmp_path):
    """The DRR stages' records carry the backend's settings as the spine's do; without them the
    summary grouped DRR under backend "?", found no probe, and left DRR out of the efficiency."""
    from retrace.drr import stages

    (tmp_path / "m.json").write_text(json.dumps(manifest()))
    llm, cache, man, backend_cfg = stages.make_llm(
        tmp_path / "m.json", "llamacpp", tmp_path / "cache", "drr-job"
    )
    run = stages._close(llm, cache, backend_cfg)  # no request sent: no engine loaded
    assert run["engine"]["name"] == "llamacpp" and "n_parallel" in run["engine"]["engine"]
    rec = {
        "stage": "drr.generate",
        "model": {"name": man["name"]},
        **run,
        "usage": {"engine_seconds": 10.0, "engine_generated_tokens": 200},
    }
    rows, total = run_summary({"a": {"rec": rec}}, [probe_file(tmp_path, man["name"], "llamacpp", 40.0)])
    assert (rows[0]["backend"], rows[0]["efficiency"]) == ("llamacpp", pytest.approx(0.5))
    assert total["efficiency"] == pytest.approx(0.5)


def test_probe_requests_shifted_by_first_share_no_prompt_or_seed_with_the_probes():
    own, later = probe.requests(4, 8), probe.requests(4, 8, first=1000)
    assert not {r.messages for r in own} & {r.messages for r in later}
    assert not {r.sampling.seed for r in own} & {r.sampling.seed for r in later}
    assert probe.requests(4, 8, first=0) == own


def test_a_probe_on_a_busy_machine_marks_the_efficiencies_unreliable(tmp_path):
    nodes = {"a" * 64: node("generate", 10.0, 500, label="majority")}
    quiet = probe_file(tmp_path, "m", "llamacpp", 100.0)
    data = json.loads(quiet.read_text())
    rows, total = run_summary(nodes, [quiet])
    assert total["unreliable"] == []
    data["machine"] = {"load_before": 1.0, "load_after": 6.5, "cpus": 2}
    quiet.write_text(json.dumps(data))
    rows, total = run_summary(nodes, [quiet])
    assert total["unreliable"] == ["load average 6.5 on 2 CPUs while the probe ran"]
    html = render_html([], [], engine={"rows": rows, "total": total}, pages={"a" * 64: "prov/aaaa.html"})
    assert 'id="engine-unreliable"' in html and "load average 6.5 on 2 CPUs" in html


def test_an_efficiency_above_one_is_marked_unreliable(tmp_path):
    nodes = {"a" * 64: node("generate", 10.0, 500, label="majority")}  # 50 tok/s
    rows, total = run_summary(nodes, [probe_file(tmp_path, "m", "llamacpp", 40.0)])
    assert rows[0]["efficiency"] == pytest.approx(1.25)
    assert total["unreliable"] == ["efficiency above 1 in generate · majority"]
