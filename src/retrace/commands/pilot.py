"""`retrace pilot`: measure each model's engine at the experiment's own context lengths, role
by role, before the spend (retrace.app.pilot), and print the grid re-sized at those rates."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from retrace.commands import command
from retrace.commands.use import set_arg


@command(
    "pilot",
    "measure each model's engine at the experiment's real context lengths; re-size the grid",
    (
        "retrace pilot --experiment paper                 # first, on the GPU allocation",
        "retrace pilot --experiment paper --model qwen2.5-math-7b --requests 16",
        "retrace pilot --experiment vllm_plumbing --decode-tokens 8   # a short CPU check",
    ),
)
def _pilot(p: argparse.ArgumentParser) -> Callable:
    from retrace.app import pilot

    p.add_argument("--configfile", type=Path, default=Path("config/config.yaml"))
    p.add_argument("--experiment", "-e", default=None, help="instead of the config file's")
    set_arg(p)
    p.add_argument("--model", action="append", default=[], help="only this model (repeatable)")
    p.add_argument(
        "--requests",
        type=int,
        default=pilot.DEFAULT_REQUESTS,
        help=f"requests per role at once (default {pilot.DEFAULT_REQUESTS}, at most the engine's slots)",
    )
    p.add_argument(
        "--decode-tokens",
        type=int,
        default=None,
        help="cap each role's generated tokens (default: none, every role at its own cap)",
    )
    p.add_argument("--results", type=Path, default=Path("results"), help="the run's results directory")

    def run(a: argparse.Namespace) -> int:
        from retrace.app.launch import global_config
        from retrace.commands.use import _slurm_profile
        from retrace.planning.cluster import limit

        if a.requests < 1 or a.requests > 999:
            p.error("--requests takes 1 to 999")
        cfg = global_config(a.configfile, a.experiment, a.set)
        pilot.run(
            cfg,
            a.results,
            tuple(a.model),
            a.requests,
            a.decode_tokens,
            limit(cfg, _slurm_profile(a.configfile)),
        )
        return 0

    return run
