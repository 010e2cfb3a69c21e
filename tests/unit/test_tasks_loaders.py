"""Loaders: file:line errors, missing mirror, hub path (monkeypatched), BIG-bench, exact match."""

import json
import sys
import types

import pytest

from retrace.tasks.base import MirrorMissing
from retrace.util.records import Problem
from retrace.util.registry import TASKS


def write_lines(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def gsm8k_cfg():
    return {"name": "gsm8k", "task": "gsm8k", "source": "mirror", "mirror_path": "gsm8k/test.jsonl"}


def test_gsm8k_gold_after_hashes_without_commas(tmp_path):
    write_lines(
        tmp_path / "gsm8k/test.jsonl", [{"question": "How many?", "answer": "10 * 123.4 = 1234\n#### 1,234"}]
    )
    problems, files = TASKS.get("gsm8k").load(gsm8k_cfg(), tmp_path)
    assert problems[0].gold == "1234"
    assert problems[0].metadata == {"source": "mirror:gsm8k/test.jsonl", "line": 1}
    assert files == [tmp_path / "gsm8k/test.jsonl"]


def test_missing_field_names_file_and_line(tmp_path):
    ok = {"question": "q", "answer": "#### 1"}
    write_lines(tmp_path / "gsm8k/test.jsonl", [ok, ok, {"question": "q"}])
    with pytest.raises(ValueError, match=r"gsm8k/test\.jsonl:3: missing 'answer'"):
        TASKS.get("gsm8k").load(gsm8k_cfg(), tmp_path)


def test_malformed_json_names_file_and_line(tmp_path):
    write_lines(tmp_path / "gsm8k/test.jsonl", [{"question": "q", "answer": "#### 1"}, "{not json"])
    with pytest.raises(ValueError, match=r"test\.jsonl:2: malformed JSON"):
        TASKS.get("gsm8k").load(gsm8k_cfg(), tmp_path)


def test_mmlu_bad_row_names_csv_line(tmp_path):
    folder = tmp_path / "mmlu/test"
    folder.mkdir(parents=True)
    (folder / "anatomy_test.csv").write_text('"Q1?",a,b,c,d,A\n"Q2?",a,b,c,d,Z\n')
    cfg = {
        "task": "mmlu",
        "source": "mirror",
        "mirror_path": "mmlu",
        "split": "test",
        "subjects": ["anatomy"],
    }
    with pytest.raises(ValueError, match=r"anatomy_test\.csv:2: answer 'Z'"):
        TASKS.get("mmlu").load(cfg, tmp_path)


def test_openbookqa_skips_only_the_listed_malformed_lines(tmp_path, caplog):
    """train.tsv:3334 lists five choices; `skip_lines` leaves it out, naming it in one log line,
    and refuses a list that went stale (a listed line that reads fine or is not in the file)."""
    from retrace.store import data

    head = "ID\tQuestion Stem\tChoices\tComplete Question\tAnswer Key"
    good = "1-1\tSun is a\t(A) star (B) moon (C) rock (D) gas\tx\tA"
    bad = "1-2\tA learned behavior\t(A) a (B) b (C) c (D) d (D) e\tx\tD"
    write_lines(tmp_path / "openbookqa/train.tsv", [head, good, bad, good.replace("1-1", "1-3")])
    cfg = {"name": "o", "task": "openbookqa", "source": "mirror", "mirror_path": "openbookqa/train.tsv"}
    cfg |= {"limit": None, "subset_seed": 0}  # stated by every dataset YAML
    with pytest.raises(ValueError, match=r"train\.tsv:3: expected choices \(A\) to \(D\)"):
        data.prepare(cfg, tmp_path)
    with caplog.at_level("WARNING"):
        problems, _ = data.prepare({**cfg, "skip_lines": [3]}, tmp_path)
    assert [p.id for p in problems] == ["openbookqa/1-1", "openbookqa/1-3"]
    assert [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()] == [
        f"skipped {tmp_path}/openbookqa/train.tsv:3 (skip_lines): expected choices (A) to (D), "
        "got ['A', 'B', 'C', 'D', 'D']"
    ]
    with pytest.raises(ValueError, match=r"train\.tsv:2: listed in skip_lines but reads fine"):
        data.prepare({**cfg, "skip_lines": [2, 3]}, tmp_path)
    with pytest.raises(ValueError, match=r"skip_lines \[9\] are not lines of the file"):
        data.prepare({**cfg, "skip_lines": [3, 9]}, tmp_path)
    with pytest.raises(ValueError, match="cannot skip_lines"):
        data.prepare({**gsm8k_cfg(), "skip_lines": [1]}, tmp_path)


@pytest.mark.parametrize("mirror", [None, "/nonexistent/retrace-mirror"])
def test_missing_mirror_says_how_to_set_it(mirror):
    with pytest.raises(MirrorMissing) as err:
        TASKS.get("gsm8k").load(gsm8k_cfg(), mirror)
    assert "config/config.yaml" in str(err.value)
    assert "snakemake --config mirror=" in str(err.value)


def test_missing_file_in_mirror_names_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="gsm8k/test.jsonl"):
        TASKS.get("gsm8k").load(gsm8k_cfg(), tmp_path)


def fake_datasets(monkeypatch, rows):
    calls = []

    def load_dataset(path, name=None, split=None, revision=None):
        calls.append((path, name, split, revision))
        return rows

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    return calls


def test_hub_source_calls_load_dataset_with_pinned_revision(monkeypatch):
    calls = fake_datasets(monkeypatch, [{"question": "2+2?", "answer": "2+2=4\n#### 4"}])
    cfg = dict(
        gsm8k_cfg(),
        source="hub",
        hub={"path": "openai/gsm8k", "name": "main", "split": "test", "revision": "abc123" * 6 + "abcd"},
    )
    problems, files = TASKS.get("gsm8k").load(cfg, None)
    assert calls == [("openai/gsm8k", "main", "test", "abc123" * 6 + "abcd")]
    assert problems[0].gold == "4" and files == []
    assert problems[0].metadata["source"] == f"hub:openai/gsm8k@{'abc123' * 6}abcd[test]"


def test_hub_rows_of_other_layouts(monkeypatch):
    fake_datasets(
        monkeypatch,
        [
            {
                "id": "x1",
                "question": "Where?",
                "answerKey": "B",
                "choices": {"label": list("ABCDE"), "text": list("vwxyz")},
            }
        ],
    )
    cfg = {
        "task": "commonsenseqa",
        "source": "hub",
        "hub": {"path": "tau/commonsense_qa", "split": "validation", "revision": "f" * 40},
    }
    (p,), _ = TASKS.get("commonsenseqa").load(cfg, None)
    assert (p.gold, p.choices, p.question) == ("B", tuple("vwxyz"), "Where?")


def test_hub_without_revision_is_refused(monkeypatch):
    fake_datasets(monkeypatch, [])
    cfg = dict(gsm8k_cfg(), source="hub", hub={"path": "openai/gsm8k", "split": "test"})
    with pytest.raises(ValueError, match="revision"):
        TASKS.get("gsm8k").load(cfg, None)


def test_bigbench_choice_and_exact(tmp_path):
    task = {
        "task_prefix": "Answer the sum.",
        "output_regex": r"[-+]?\d+",
        "examples": [
            {"input": "What is 1 plus 2?", "target": "3", "target_scores": {"2": 0, "3": 1, "banana": 0}}
        ],
    }
    write_lines(tmp_path / "bigbench/arith/task.json", [task])
    cfg = {"task": "bigbench_mc", "source": "mirror", "mirror_path": "bigbench", "bigbench_task": "arith"}
    (mc,), _ = TASKS.get("bigbench_mc").load(cfg, tmp_path)
    assert (mc.choices, mc.gold) == (("2", "3", "banana"), "B")
    assert mc.question == "Answer the sum.\n\nWhat is 1 plus 2?"
    (ex,), _ = TASKS.get("bigbench_exact").load(dict(cfg, task="bigbench_exact"), tmp_path)
    t = TASKS.get("bigbench_exact")
    assert t.is_correct(t.extract_answer("1 plus 2 makes 3.\nAnswer: 3.", ex), ex)
    assert not t.is_correct(t.extract_answer("Answer: 4", ex), ex)


def test_bigbench_missing_target_scores_names_example(tmp_path):
    write_lines(tmp_path / "bigbench/t/task.json", [{"examples": [{"input": "x", "target": "y"}]}])
    cfg = {"task": "bigbench_mc", "source": "mirror", "bigbench_task": "t"}
    with pytest.raises(ValueError, match=r"task\.json: examples\[0\]: missing 'target_scores'"):
        TASKS.get("bigbench_mc").load(cfg, tmp_path)


@pytest.mark.parametrize(
    "text, ok",
    [
        ("unscrambled, it reads THE.\nAnswer: The", True),
        ("The answer is: the", True),
        ("the answer depends on context\nthe", True),
        ("Answer: then", False),
        ("", False),
    ],
)
def test_exact_match_normalises_case_and_space(text, ok):
    t = TASKS.get("bigbench_exact")
    p = Problem(id="w", question="q", gold="the", metadata={"targets": ["the"]})
    assert t.is_correct(t.extract_answer(text, p), p) is ok


def test_registered_tasks_have_templates_and_kinds():
    from retrace.util.templates import template_path

    for name in TASKS.names():
        t = TASKS.get(name)
        assert t.name == name and t.kind in ("math", "multiple_choice", "exact")
        assert template_path(t.default_template).is_file()


def test_prompt_renders_choices_and_fails_on_missing_variables():
    from retrace.util.templates import render

    p = Problem(id="x", question="Pick one.", gold="A", choices=("red", "blue"))
    text = TASKS.get("smoke_mc").prompt(p)
    assert "A) red\nB) blue" in text and "Answer: X" in text
    assert "\\boxed{}" in TASKS.get("smoke_math").prompt(Problem("m", "1+1?", "2"))
    with pytest.raises(Exception, match="choices"):
        render("mc_cot.j2", question="q")


def test_discovery_imports_no_heavy_modules():
    import subprocess

    code = (
        "import sys; from retrace.util.registry import TASKS; TASKS.names(); "
        "heavy = {'datasets', 'math_verify', 'sympy', 'jinja2'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**__import__("os").environ})
