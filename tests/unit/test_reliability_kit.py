"""The reliability suite compares what a result is, not how it was produced: two runs of the same
requests (one by the engine, one from the request cache) must compare equal, whatever timing or
cache counter a record type gains (benchmarks/reliability_kit.py, records.MEASURED)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from fake_backend import chat, scripted_llm

from retrace.engine.llm import Usage
from retrace.util.records import Completion, measured_fields

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import reliability_kit as kit

SCRIPT = {"apples": "I count seven apples", "eggs": "thirty eggs"}


def result_of(llm, reqs) -> dict:
    """What a generation job writes about these requests: the samples and its usage."""
    done = llm.generate(reqs)
    return {"samples": [c.to_dict() for c in done], "generation_usage": dataclasses.asdict(llm.usage)}


def test_an_engine_run_and_a_cached_rerun_compare_equal(tmp_path):
    reqs = [chat("apples?"), chat("eggs?")]
    fresh, _ = scripted_llm(tmp_path, {"script": SCRIPT})
    first = result_of(fresh, reqs)
    again, engines = scripted_llm(fresh.cache, {"script": SCRIPT})
    second = result_of(again, reqs)
    assert not engines  # the rerun was served entirely by the cache: timings and counters differ
    assert first != second
    assert kit._scrub(first) == kit._scrub(second)


def test_the_comparison_keeps_what_a_result_is():
    kept = {f.name for f in dataclasses.fields(Completion)} - kit.VOLATILE
    assert {"text", "finish_reason", "prompt_tokens", "generated_tokens", "key"} <= kept
    usage = {f.name for f in dataclasses.fields(Usage)} - kit.VOLATILE
    assert {"requests", "prompt_tokens_all", "generated_tokens_all"} <= usage


def test_every_timing_or_engine_counter_is_marked_measured():
    """A new `*_seconds` or `engine_*` field must carry records.MEASURED, or reliability
    comparisons of two equal runs would differ on it."""
    for t in (Completion, Usage):
        for f in dataclasses.fields(t):
            timing = f.name.endswith(("_s", "_seconds", "seconds")) or f.name.startswith(
                ("engine_", "cache_")
            )
            assert not timing or f.name in measured_fields(t), f"{t.__name__}.{f.name} is not MEASURED"


def test_the_suite_works_in_a_fresh_folder_of_its_own_unless_told(tmp_path, monkeypatch):
    """A fixed /tmp default broke CI when another user's run was left there (files it could not
    delete): by default each run gets a new folder; a named one that cannot be cleared says so."""
    import argparse
    import shutil

    import reliability

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(reliability.tempfile, "tempdir", None)
    runs = [argparse.Namespace(work=None, keep=False) for _ in range(2)]
    assert [reliability.prepare_work(a) for a in runs] == [None, None]
    assert runs[0].work != runs[1].work and all(a.work.parent == tmp_path for a in runs)
    assert "--keep needs --work" in reliability.prepare_work(argparse.Namespace(work=None, keep=True))

    theirs = tmp_path / "theirs"
    (theirs / "src").mkdir(parents=True)

    def refuse(path, *a, **k):
        raise PermissionError(13, "Permission denied", str(theirs / "src/cli.py"))

    monkeypatch.setattr(shutil, "rmtree", refuse)
    problem = reliability.prepare_work(argparse.Namespace(work=theirs, keep=False))
    assert problem.startswith(f"cannot clear --work {theirs}: Permission denied: ")
    assert "cli.py" in problem and "\n" not in problem


def test_a_bad_input_case_that_did_not_run_is_reported_as_skipped_not_clear(monkeypatch, capsys):
    """Without root the read-only-mirror case cannot mount its tmpfs: it did not run, so it is
    neither a clear error nor a failure, and the summary says it was skipped."""
    import reliability
    import reliability_inputs as inputs

    cases = [
        inputs.Case("data: truncated", True, "bad.jsonl:2: ..."),
        inputs.Case("mirror: read-only", False, "skipped (needs root to mount)", skipped=True),
    ]
    monkeypatch.setattr(reliability, "bad_inputs", lambda work, root: cases)
    assert reliability.run_bad_inputs(None, dataclasses.make_dataclass("Ref", ["root"])(None))
    out = capsys.readouterr().out
    assert "bad_inputs: 1 tried, 1 clear errors, nothing half-written; 1 skipped" in out
    assert "  --  mirror: read-only: skipped" in out
    cases[0] = inputs.Case("data: truncated", False, "no place named")
    assert not reliability.run_bad_inputs(None, dataclasses.make_dataclass("Ref", ["root"])(None))
