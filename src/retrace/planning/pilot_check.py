"""`retrace plan --check` on pilot results (results/pilot/<model>/<backend>.json, written by
`retrace pilot`, retrace.app.pilot): whether each GPU engine of the experiment has one, and
whether the one found was measured for that model and engine.

    pilot_lines(global_cfg, Path("results/pilot"))   # [(line, fails)] for `plan --check`

A GPU engine (a vLLM job, or a client of a vLLM server) without a pilot is priced at the
backend's stated rates: a note says so once per engine and names the command that measures
them. A result of another model, backend or server engine (a file copied from another run, a
pilot of another experiment's engine) is a failure, one line naming the file, since pricing from
it would size every job of that engine by another engine's speed. Unreadable files likewise.
"""

from __future__ import annotations

import json
from pathlib import Path

from retrace.planning.devices import priced_gpus
from retrace.planning.plan import job_config, jobs


def gpu_engines(global_cfg: dict) -> dict[tuple[str, str], dict]:
    """(model, backend) -> the first job's engine settings, for each engine priced on GPUs."""
    out: dict[tuple[str, str], dict] = {}
    for job in jobs(global_cfg):
        cfg = job_config(job)
        if (job.model, job.backend) not in out and priced_gpus(cfg):
            out[(job.model, job.backend)] = dict(cfg["backend"].get("engine") or {})
    return out


def problem(path: Path, model: str, backend: str, engine: dict) -> str | None:
    """Why the pilot result at `path` must not price (model, backend) with `engine`, or None."""
    try:
        found = json.loads(path.read_text())
        got_model, got_backend = found["model"], found["backend"]
        measured = found.get("engine") or {}
        rates = found["rates"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"{path}: not a pilot result ({type(e).__name__}: {e}); run `retrace pilot` again"
    if got_model != model or got_backend != backend:
        return f"{path}: measured {got_model} on {got_backend}, not {model} on {backend}; run `retrace pilot` again"
    if measured.get("server") != engine.get("server"):
        return f"{path}: measured through a {measured.get('server')} server, this experiment's jobs use {engine.get('server')}"
    if not isinstance(rates, list) or not rates:
        return f"{path}: no rates measured; run `retrace pilot` again"
    return None


def pilot_lines(global_cfg: dict, folder: Path) -> list[tuple[str, bool]]:
    """(line, fails) per GPU engine: no pilot yet (a note), or a result that is not its own (a failure)."""
    out = []
    for (model, backend), engine in gpu_engines(global_cfg).items():
        path = folder / model / f"{backend}.json"
        if not path.exists():
            out.append(
                (
                    f"no pilot has run for {model} on {backend}: its rates are assumed (the backend's stated "
                    f"throughput); on the GPU allocation run `retrace pilot --experiment {global_cfg['experiment']}` "
                    f"first (docs/guides/gpu.md)",
                    False,
                )
            )
        elif why := problem(path, model, backend, engine):
            out.append((why, True))
    return out
