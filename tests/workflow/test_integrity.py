"""Rerun keys, weights and moved runs on finished real runs (docs/reruns.md).

- editing the statistics reruns diagnose (with its cell's scoring) and claims, not generation;
- one flipped byte of the materialised weights fails the audit of a generation result, naming
  the weights, and makes the jobs that load them stale;
- a `cp -a` copy of a finished run is finished ("Nothing to be done") and audits its own files.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from tests.workflow.conftest import assert_relocatable, edited, planned_outputs, retrace

pytestmark = pytest.mark.slow

GEN = "generations/smollm2-135m-q40/llamacpp"


@contextlib.contextmanager
def flipped(path: Path, at: int = 4096):
    """One byte of `path` flipped for the block; bytes and mtime restored after."""
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 1]))
    try:
        yield path
    finally:
        with open(path, "r+b") as f:
            f.seek(at)
            f.write(b)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # the shared run stays finished


def a_generation(root: Path) -> str:
    return str(next((root / "results" / GEN).rglob("seed0.jsonl")).relative_to(root))


def test_a_statistics_edit_reruns_diagnose_and_claims_only(refined):
    planned = planned_outputs_after(refined, "src/retrace/scoring/stats.py")
    assert "report/claims.csv" in planned
    assert any(p.startswith("diagnostics/") for p in planned), planned
    assert not any(p.startswith(("generations/", "data/")) for p in planned), planned
    # Scoring and diagnosis are one job per cell (retrace.stages.score_cell): the cells that
    # diagnose a refinement job rewrite their scores too, no other cell does.
    rescored = {_cell(p) for p in planned if p.startswith("scores/")}
    assert rescored <= {_cell(p) for p in planned if p.startswith("diagnostics/")}, planned


def _cell(path: str) -> tuple[str, ...]:
    """(model, backend, dataset, seed) of `<kind>/<model>/<backend>/<dataset>/seed<S>/<label>.json`."""
    _, model, backend, dataset, seed, _ = path.split("/")
    return model, backend, dataset, seed


def planned_outputs_after(root: Path, rel: str) -> set[str]:
    with edited(root / rel, lambda s: s + "\n# a harmless edit\n"):
        return planned_outputs(root)


def test_a_flipped_byte_in_the_weights_fails_the_audit_and_stales_their_users(pipeline):
    [gguf] = (pipeline / "results/models").glob("*/model.gguf")
    target = a_generation(pipeline)
    with flipped(gguf):
        proc = retrace(pipeline, "audit", target)
        assert proc.returncode == 1 and "model.gguf" in proc.stdout, proc.stdout[-2000:]
        planned = planned_outputs(pipeline)
        assert any(p.startswith(GEN) for p in planned), planned
    assert retrace(pipeline, "audit", target).returncode == 0


def test_a_copied_run_is_finished_and_audits_its_own_files(pipeline, tmp_path):
    copy = tmp_path / "moved"
    assert_relocatable(pipeline, copy, ["results/report/results.csv"])
    with flipped(copy / "results/data/smoke_math.jsonl", at=10):
        proc = retrace(copy, "audit", "results/report/results.csv")
        assert proc.returncode == 1 and "smoke_math.jsonl" in proc.stdout
    assert retrace(pipeline, "audit", "results/report/results.csv").returncode == 0  # the original
