"""The internal steps the workflow's rules call (plumbing; `retrace COMMAND --help` for each):
model, data, probe, report; the spine family's (generate, score, merge-shards, diagnose,
score-cell, claims) are in retrace/spine/commands.py. Each parses its arguments here and calls
the stage function in retrace.stages that tests call."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from retrace.commands import command
from retrace.commands.args import job_args, job_of, planned_args, planned_paths


@command("model", "materialise and fingerprint a model", step=True)
def _model(p: argparse.ArgumentParser) -> Callable:
    p.add_argument("--model", required=True)
    p.add_argument("--override", action="append", default=[])
    p.add_argument("--out", type=Path, required=True)

    def run(a: argparse.Namespace) -> None:
        from retrace.stages import model

        model.run(a.model, a.out, tuple(a.override))

    return run


@command("data", "prepare a dataset in the canonical schema", step=True)
def _data(p: argparse.ArgumentParser) -> Callable:
    p.add_argument("--dataset", required=True)
    p.add_argument(
        "--mirror", default=None, help="benchmark mirror directory; '-': none (retrace.config.mirror)"
    )
    p.add_argument("--override", action="append", default=[])
    p.add_argument("--out", type=Path, required=True)

    def run(a: argparse.Namespace) -> None:
        from retrace.stages import data

        data.run(a.dataset, None if a.mirror in ("-", "") else a.mirror, a.out, tuple(a.override))

    return run


@command("probe", "measure the raw engine's full-batch tok/s (for the run summary)", step=True)
def _probe(p: argparse.ArgumentParser) -> Callable:
    job_args(p)
    p.add_argument("--manifest", type=Path, required=True)
    p.add_argument("--tokens", type=int, default=None)
    p.add_argument("--out", type=Path, required=True)

    def run(a: argparse.Namespace) -> None:
        from retrace.stages import probe

        probe.run(job_of(a), a.manifest, a.out, a.tokens or probe.PROBE_TOKENS)

    return run


@command("report", "build the results table", step=True)
def _report(p: argparse.ArgumentParser) -> Callable:
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--claims", type=Path, default=None)
    p.add_argument("--diagnostics", type=Path, action="append", default=[], help="repeatable")
    p.add_argument(
        "--section",
        type=Path,
        action="append",
        default=[],
        help="a method family's report section JSON (repeatable; see report/sections.py)",
    )
    p.add_argument(
        "--probe",
        type=Path,
        action="append",
        default=[],
        help="a probe stage output: the raw engine rate for the run summary (repeatable)",
    )
    p.add_argument("scores", type=Path, nargs="*")
    planned_args(p)

    def run(a: argparse.Namespace) -> None:
        from retrace.planning.plan import diagnosed
        from retrace.stages import report

        scores = planned_paths(p, a, "scores", ".json")
        diagnostics = planned_paths(p, a, "diagnostics", ".json", diagnosed)
        if not scores:
            p.error("give score files or --experiment")
        report.run(scores, a.out_dir, a.claims, diagnostics, a.section, a.probe)

    return run


@command("hub-artifact", "download a hub artifact at its pinned commit; write its manifest", step=True)
def _hub_artifact(p: argparse.ArgumentParser) -> Callable:
    p.add_argument("--repo", required=True)
    p.add_argument("--revision", required=True, help="the pinned commit (40 hex)")
    p.add_argument("--out", type=Path, required=True)

    def run(a: argparse.Namespace) -> None:
        from retrace.app import hub_artifacts

        hub_artifacts.materialise(a.repo, a.revision, a.out)

    return run
