"""Per-question transcripts (retrace.report.transcripts): question, samples, extracted
answers, gold and verdicts, one page per run, linked from the results table."""

from __future__ import annotations

import json

from retrace.report import build_report, transcripts
from retrace.store.provenance import Provenance


def write(path, text, stage, inputs=()):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    Provenance(stage, {"stage": stage}, [], inputs=[str(i) for i in inputs]).write(path)
    return path


def small_run(tmp_path, questions=2, text="The answer is 4."):
    root = tmp_path / "results"
    problems = [
        {"id": f"q{i}", "question": f"What is {i} + 2?", "gold": str(i + 2)} for i in range(1, questions + 1)
    ]
    data = write(root / "data" / "d.jsonl", "".join(json.dumps(p) + "\n" for p in problems), "data")
    gens = [
        {
            "problem_id": p["id"],
            "method": "majority",
            "samples": [{"index": k, "text": text} for k in range(2)],
        }
        for p in problems
    ]
    job = {
        "model": "m",
        "backend": "llamacpp",
        "dataset": "d",
        "label": "majority",
        "method": "majority",
        "seed": 0,
    }
    generations = write(
        root / "generations/m/llamacpp/d/majority/seed0.jsonl",
        "".join(json.dumps(g) + "\n" for g in gens),
        "generate",
        [data],
    )
    per_problem = [
        {
            "id": p["id"],
            "answers": ["4", None],
            "sources": ["statement", "none"],
            "correct": [p["gold"] == "4", False],
            "truncated": [False, True],
            "vote": "4",
            "vote_correct": p["gold"] == "4",
        }
        for p in problems
    ]
    score = {
        "job": job,
        "n_problems": questions,
        "n_samples": 2 * questions,
        "accuracy": {"value": 0.5, "ci_low": 0.0, "ci_high": 1.0},
        "maj@k": {"1": {"value": 0.5, "ci_low": 0.0, "ci_high": 1.0}},
        "pass@k": {"1": 0.5},
        "tokens": {"prompt": 40, "cached_prompt": 0, "generated": 20, "per_problem_mean_generated": 10.0},
        "flops": {"nominal": 120, "effective": 120},
        "per_problem": per_problem,
    }
    return write(
        root / "scores/m/llamacpp/d/majority/seed0.json", json.dumps(score), "score", [generations, data]
    )


def test_a_transcript_holds_question_samples_answers_gold_and_verdicts(tmp_path):
    t = transcripts.transcript(small_run(tmp_path))
    first, second = t["items"]
    assert (first["question"], first["gold"], first["vote"], first["vote_correct"]) == (
        "What is 1 + 2?",
        "3",
        "4",
        False,
    )
    assert second["vote_correct"] is True
    assert [(s["text"], s["answer"], s["source"], s["correct"]) for s in second["samples"]] == [
        ("The answer is 4.", "4", "statement", True),
        ("The answer is 4.", None, "none", False),
    ]
    assert second["samples"][1]["truncated"] is True


def test_large_runs_keep_pages_small_and_say_where_the_rest_is(tmp_path, monkeypatch):
    monkeypatch.setattr(transcripts, "MAX_QUESTIONS", 3)
    monkeypatch.setattr(transcripts, "MAX_CHARS", 10)
    t = transcripts.transcript(small_run(tmp_path, questions=5))
    assert len(t["items"]) == 3 and t["n_problems"] == 5
    sample = t["items"][0]["samples"][0]
    assert sample["text"] == "The answer" and sample["cut"] == len("The answer is 4.") - 10


def test_the_report_links_each_run_to_its_transcript_page(tmp_path):
    score = small_run(tmp_path)
    out = tmp_path / "report"
    build_report([score], out)
    page = out / "transcripts/m/llamacpp/d/majority/seed0.html"
    html = page.read_text()
    assert "What is 2 + 2?" in html and "gold: <strong>4</strong>" in html and "vote 4: right" in html
    assert '<a href="../../../../../index.html">' in html
    index = (out / "index.html").read_text()
    assert 'href="transcripts/m/llamacpp/d/majority/seed0.html">questions</a>' in index


def test_a_run_without_its_generations_has_no_page(tmp_path):
    score = small_run(tmp_path)
    (tmp_path / "results/generations/m/llamacpp/d/majority/seed0.jsonl").unlink()
    assert transcripts.transcript(score) is None
