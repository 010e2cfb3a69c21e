"""Progress lines in job logs (retrace.util.progress, tqdm) and `retrace status` reading them."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time

from fake_backend import chat, scripted_llm

from retrace.util.progress import LINE, format_status, last_progress, progress, status


def test_lines_in_a_log_show_done_total_rate_and_eta(monkeypatch):
    monkeypatch.setenv("RETRACE_PROGRESS_SECONDS", "0")
    log = io.StringIO()
    with progress("generate qwen", total=4, stream=log) as bar:
        for _ in range(4):
            bar.advance(1, tokens=50)
    lines = log.getvalue().splitlines()
    assert lines and "\r" not in log.getvalue()
    parsed = [LINE.match(line).groupdict() for line in lines]
    assert parsed[-1]["label"] == "generate qwen" and (parsed[-1]["done"], parsed[-1]["total"]) == ("4", "4")
    assert parsed[-1]["unit"] == "requests" and float(parsed[-1]["rate"]) > 0
    assert any(p["done"] == "1" for p in parsed)  # refreshed while running, one line each


def test_engine_work_prints_progress_to_the_job_log(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RETRACE_PROGRESS_SECONDS", "0")
    llm, _ = scripted_llm(tmp_path, {"script": ["seven"], "batch_size": 2})
    llm.generate([chat(f"q{i}") for i in range(5)])
    err = capsys.readouterr().err
    last = [LINE.match(line) for line in err.splitlines() if LINE.match(line)][-1]
    assert last["label"].startswith("generate") and (last["done"], last["total"]) == ("5", "5")
    llm.generate([chat(f"q{i}") for i in range(5)])  # all cached: no engine, no bar
    assert LINE.search(capsys.readouterr().err or "") is None


def write_log(path, done, total, age=0.0):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"INFO start\nprogress generate m: {done}/{total} requests [00:10<00:20, 12.5 tok/s]\nINFO more\n"
    )
    t = time.time() - age
    os.utime(path, (t, t))


def test_status_lists_unfinished_jobs_and_marks_stale_ones(tmp_path):
    write_log(tmp_path / "gen" / "a.log", 3, 10)
    write_log(tmp_path / "gen" / "b.log", 10, 10)  # finished
    write_log(tmp_path / "drr" / "c.log", 1, 8, age=3600)  # killed an hour ago
    (tmp_path / "d.log").write_text("no progress here\n")
    rows = status(tmp_path, stale_after=600)
    assert [(r["log"].rsplit("/", 1)[1], r["done"], r["stale"]) for r in rows] == [
        ("a.log", "3", False),
        ("c.log", "1", True),
    ]
    text = format_status(rows)
    assert "generate m 3/10 requests (30%), 12.5 tok/s, ETA 00:20" in text and "STALE" in text
    assert last_progress(tmp_path / "d.log") is None
    assert format_status([]).startswith("no running jobs")


def test_a_finished_line_glued_to_engine_log_text_counts_as_finished(tmp_path):
    """llama.cpp writes to the same stderr without a newline: the last progress line of a
    finished beam job arrived as `...llama_perf ... progress beam: 4/4 ...`."""
    log = tmp_path / "beam.log"
    log.write_text(
        "progress beam: 0/4 problems [00:00<?]\n"
        "llama_perf_context_print: total time = 10 msprogress beam: 4/4 problems [00:41<00:00]\n"
    )
    assert last_progress(log)["done"] == "4"
    assert status(tmp_path) == []


def test_retrace_status_command(tmp_path):
    write_log(tmp_path / "logs" / "x.log", 2, 4)
    out = subprocess.run(
        [sys.executable, "-m", "retrace", "status", "--logs", str(tmp_path / "logs")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    assert out.returncode == 0 and "x.log: generate m 2/4 requests (50%)" in out.stdout
