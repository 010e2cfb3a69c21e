"""The run summary: how busy the pipeline kept the engine, per stage, against the raw rate.

    rows, total = run_summary(lineage.collect(report_inputs), probe_files)

Every job that ran an LLM records its engine accounting in its provenance record (`usage`:
engine_seconds, engine_generated_tokens, engine_prompt_tokens; retrace.engine.llm.Usage). The
summary takes the records of the report inputs' lineage (retrace.report.lineage.collect),
counts each job once, and groups by stage (spine `generate` jobs by method label), model and
backend. `tok_s` = generated tokens / engine-seconds; `efficiency` = tok_s / the raw
full-batch rate that the `probe` stage measured for that model and backend on this machine
(retrace.stages.probe). That ratio counts only generated tokens, so a prompt-heavy stage
(ART's long demonstrations, the judge's one-token answers) reads low even when the engine
never idles; `work_efficiency` also credits prompt processing: the seconds the raw engine
would need for the stage's work (generated / raw tok/s + prompt tokens not served from the
engine's KV cache / raw prefill tok/s, both rates from the probe) over its engine-seconds.
`load_seconds`: time spent loading the engine (once per job that
missed the cache; not part of engine-seconds). The total's efficiency is engine-seconds-weighted:
sum(generated / raw) / sum(engine-seconds), over the rows that have a probe.

Not counted: shard records (their merged record holds the sums) and jobs served wholly from
the request cache (0 engine-seconds). Engine-seconds are the engine's busy time as the
scheduler saw it, so time the engine sat idle inside a job is not in them; the job's wall
time is in its Snakemake benchmark file.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path


def _engine_jobs(nodes: dict[str, dict]) -> list[tuple[str, dict]]:
    """(record sha256, record) of jobs that ran the engine, each job once (a stage writing
    two artifacts from one engine run records the same usage twice)."""
    out, seen = [], set()
    for sha, node in sorted(nodes.items()):
        r = node["rec"]
        usage = r.get("usage")
        if not isinstance(usage, dict) or not usage.get("engine_seconds") or r.get("shard"):
            continue
        key = (r.get("stage"), json.dumps(usage, sort_keys=True))
        if key not in seen:
            seen.add(key)
            out.append((sha, r))
    return out


def _group(r: dict) -> tuple[str, str, str]:
    stage = r.get("stage", "?")
    if stage == "generate" and isinstance(r.get("job"), dict):
        stage = f"generate · {r['job'].get('label')}"
    engine = r.get("engine")
    backend = engine.get("name") if isinstance(engine, dict) else engine
    backend = backend or (r.get("job") or {}).get("backend") or "?"
    return stage, (r.get("model") or {}).get("name", "?"), str(backend)


def load_probes(files) -> dict[tuple[str, str], dict]:
    """(model, backend) -> the probe's raw rates: tok_s (decode), prefill_tok_s (may be None)."""
    out = {}
    for f in files:
        p = json.loads(Path(f).read_text())
        if p.get("tok_s"):
            out[(p["model"], p["backend"])] = {
                "tok_s": float(p["tok_s"]),
                "prefill_tok_s": p.get("prefill_tok_s"),
                "busy": busy(p.get("machine") or {}),
            }
    return out


def busy(machine: dict) -> str | None:
    """Why a probe's rate is unreliable (other work ran beside it), or None. The 1-minute load
    average lags, so the higher of before and after counts: above the CPU count, the probe
    shared the cores and its raw rate reads low (every efficiency against it reads high)."""
    loads = [x for x in (machine.get("load_before"), machine.get("load_after")) if x is not None]
    cpus = machine.get("cpus")
    if loads and cpus and max(loads) > cpus:
        return f"load average {max(loads):.1f} on {cpus} CPUs while the probe ran"
    return None


def _ideal_seconds(s: dict, raw: dict | None) -> float | None:
    """Seconds the raw engine would take for this work, or None without both rates."""
    if not raw or not raw.get("prefill_tok_s"):
        return None
    prompt = s["prompt_tokens"] - s["cached_prompt_tokens"]
    return s["generated_tokens"] / raw["tok_s"] + prompt / float(raw["prefill_tok_s"])


def run_summary(nodes: dict[str, dict], probe_files=()) -> tuple[list[dict], dict]:
    """Per-stage rows and the run's total (see the module docstring); `nodes` as
    retrace.report.lineage.collect returns them. Each row lists its records' sha256."""
    raw = load_probes(probe_files)
    sums: dict = defaultdict(
        lambda: {
            "jobs": 0,
            "engine_seconds": 0.0,
            "generated_tokens": 0,
            "prompt_tokens": 0,
            "cached_prompt_tokens": 0,
            "load_seconds": 0.0,
            "records": [],
        }
    )
    for sha, r in _engine_jobs(nodes):
        s, u = sums[_group(r)], r["usage"]
        s["jobs"] += 1
        s["records"].append(sha)
        s["engine_seconds"] += float(u["engine_seconds"])
        s["generated_tokens"] += int(u.get("engine_generated_tokens", 0))
        s["prompt_tokens"] += int(u.get("engine_prompt_tokens", 0))
        s["cached_prompt_tokens"] += int(u.get("engine_cached_prompt_tokens", 0))
        s["load_seconds"] += float(u.get("engine_load_seconds", 0.0))
    rows = [
        _row(stage, model, backend, s, raw.get((model, backend)))
        for (stage, model, backend), s in sorted(sums.items())
    ]
    return rows, _total(rows)


def _row(stage: str, model: str, backend: str, s: dict, raw: dict | None) -> dict:
    tok_s = s["generated_tokens"] / s["engine_seconds"]
    ideal = _ideal_seconds(s, raw)
    return {
        "stage": stage,
        "model": model,
        "backend": backend,
        **s,
        "tok_s": tok_s,
        "raw_tok_s": raw["tok_s"] if raw else None,
        "efficiency": tok_s / raw["tok_s"] if raw else None,
        "ideal_seconds": ideal,
        "work_efficiency": ideal / s["engine_seconds"] if ideal is not None else None,
        "probe_busy": raw.get("busy") if raw else None,
    }


def _unreliable(rows: list[dict]) -> list[str]:
    """Reasons not to trust the efficiencies: a probe that shared the machine, or an efficiency
    above 1 (a pipeline cannot beat its own engine's full-batch rate; the probe read low)."""
    out = sorted({r["probe_busy"] for r in rows if r.get("probe_busy")})
    over = [r["stage"] for r in rows if (r["efficiency"] or 0) > 1 or (r["work_efficiency"] or 0) > 1]
    if over:
        out.append(f"efficiency above 1 in {', '.join(over)}")
    return out


def _total(rows: list[dict]) -> dict:
    seconds = sum(r["engine_seconds"] for r in rows)
    generated = sum(r["generated_tokens"] for r in rows)
    probed = [r for r in rows if r["raw_tok_s"]]
    probed_s = sum(r["engine_seconds"] for r in probed)
    eff = sum(r["generated_tokens"] / r["raw_tok_s"] for r in probed) / probed_s if probed_s else None
    worked = [r for r in rows if r["ideal_seconds"] is not None]
    worked_s = sum(r["engine_seconds"] for r in worked)
    return {
        "unreliable": _unreliable(rows),
        "jobs": sum(r["jobs"] for r in rows),
        "engine_seconds": seconds,
        "generated_tokens": generated,
        "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
        "cached_prompt_tokens": sum(r["cached_prompt_tokens"] for r in rows),
        "load_seconds": sum(r["load_seconds"] for r in rows),
        "tok_s": generated / seconds if seconds else None,
        "efficiency": eff,
        "work_efficiency": sum(r["ideal_seconds"] for r in worked) / worked_s if worked_s else None,
    }
