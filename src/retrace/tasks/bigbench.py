"""BIG-bench JSON tasks (`<task>/task.json`, or `<task>/<subtask>/task.json`).

Two registered tasks read the same files:
  bigbench_mc     multiple choice from `target_scores` (choices in file order; gold is
                  the highest-scoring choice), for tasks scored by multiple_choice_grade;
  bigbench_exact  free text from `target` (a string or a list of accepted strings),
                  judged like BIG-bench's exact_str_match (see `_exact.py`).
Config: `bigbench_task: arithmetic/1_digit_addition`, `mirror_path: bigbench` (or, for the
subsets bundled with retrace, `source: bundled`, `bundled_path: bigbench`).
Hub rows (tasksource/bigbench: inputs, targets, multiple_choice_targets/_scores) map to the same.
"""

from __future__ import annotations

import json
from pathlib import Path

from retrace.tasks._choice import ChoiceTask
from retrace.tasks._exact import ExactTask
from retrace.tasks.base import LETTERS, register, require, source_file
from retrace.util.records import Problem

# BIG-bench's default output prefix ("\nA: ") is few-shot scaffolding; task-specific
# prefixes (e.g. anachronisms' "Does the preceding sentence contain ...?") carry the
# question and are kept.
SCAFFOLD_PREFIXES = ("", "A:", "Answer:", "Output:")


def task_json(cfg: dict, root: Path, source: str) -> tuple[Path, str]:
    """(path, label) of the task's task.json."""
    task = cfg.get("bigbench_task")
    if not task:
        raise ValueError(f"dataset {cfg.get('name')!r}: set bigbench_task (e.g. navigate)")
    key = "bundled_path" if source == "bundled" else "mirror_path"  # the folder holding the tasks
    return source_file(dict(cfg, **{key: f"{cfg.get(key) or 'bigbench'}/{task}/task.json"}), root, source)


def read_task_json(cfg: dict, root: Path, source: str) -> tuple[dict, Path, str]:
    path, label = task_json(cfg, root, source)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}: malformed JSON: {e.msg}") from None
    return data, path, label


def question_text(data: dict, example: dict, where: str) -> str:
    parts = [data.get("task_prefix", "").strip(), str(require(example, "input", where)).strip()]
    suffix = data.get("example_output_prefix", "").strip()
    if suffix not in SCAFFOLD_PREFIXES:
        parts.append(suffix)
    return "\n\n".join(p for p in parts if p)


class BigBench:
    """Shared reading of task.json files; subclasses turn one example into a Problem."""

    def example_problem(self, data: dict, ex: dict, pid: str, where: str, meta: dict) -> Problem:
        raise NotImplementedError

    def source_files(self, cfg: dict, root: Path, source: str) -> list[Path]:
        return [task_json(cfg, root, source)[0]]

    def read_file(self, cfg: dict, root: Path, source: str) -> tuple[list[Problem], list[Path]]:
        data, path, label = read_task_json(cfg, root, source)
        examples = data.get("examples")
        if not isinstance(examples, list):
            raise ValueError(f"{path}: no 'examples' list")
        task = cfg["bigbench_task"]
        problems = [
            self.example_problem(
                data,
                ex,
                f"{task}/{i}",
                f"{path}: examples[{i}]",
                {"source": label, "index": i, "bigbench_task": task},
            )
            for i, ex in enumerate(examples)
        ]
        return problems, [path]


@register("bigbench_mc")
class BigBenchChoice(BigBench, ChoiceTask):
    def example_problem(self, data: dict, ex: dict, pid: str, where: str, meta: dict) -> Problem:
        scores = require(ex, "target_scores", where)
        if not isinstance(scores, dict) or not 2 <= len(scores) <= len(LETTERS):
            raise ValueError(f"{where}: 'target_scores' must map 2-26 choices to scores")
        choices = tuple(str(c) for c in scores)
        best = max(range(len(choices)), key=lambda i: float(scores[choices[i]]))
        return Problem(
            id=f"{self.name}/{pid}",
            question=question_text(data, ex, where),
            gold=LETTERS[best],
            choices=choices,
            metadata=meta,
        )

    def from_hub_row(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        ex = {
            "input": row.get("inputs"),
            "target_scores": dict(
                zip(
                    require(row, "multiple_choice_targets", where),
                    require(row, "multiple_choice_scores", where),
                )
            ),
        }
        return self.example_problem({}, ex, str(row.get("idx", index)), where, meta)


@register("bigbench_exact")
class BigBenchExact(BigBench, ExactTask):
    def example_problem(self, data: dict, ex: dict, pid: str, where: str, meta: dict) -> Problem:
        target = require(ex, "target", where)
        targets = [str(t) for t in (target if isinstance(target, list) else [target])]
        meta = dict(meta, targets=targets, output_regex=data.get("output_regex"))
        return Problem(
            id=f"{self.name}/{pid}", question=question_text(data, ex, where), gold=targets[0], metadata=meta
        )

    def from_hub_row(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        ex = {"input": row.get("inputs"), "target": require(row, "targets", where)}
        return self.example_problem({}, ex, str(row.get("idx", index)), where, meta)
