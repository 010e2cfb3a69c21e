"""Bundled smoke sets: 20 easy maths word problems and 20 general-knowledge questions.

Written for retrace (not copied from any benchmark) so that end-to-end tests run
offline with a tiny model. Files: `bundled/smoke_math.jsonl` ({"id", "question",
"answer"}) and `bundled/smoke_mc.jsonl` ({"id", "question", "choices" [4], "answer" letter}).
"""

from __future__ import annotations

from retrace.tasks._choice import ChoiceTask
from retrace.tasks._math import MathTask
from retrace.tasks.base import LETTERS, register, require
from retrace.util.records import Problem


@register("smoke_math")
class SmokeMath(MathTask):
    bundled_file = "smoke_math.jsonl"

    def row_problem(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        return Problem(
            id=f"{self.name}/{require(row, 'id', where)}",
            question=require(row, "question", where),
            gold=str(require(row, "answer", where)),
            metadata=dict(meta),
        )


@register("smoke_mc")
class SmokeChoice(ChoiceTask):
    bundled_file = "smoke_mc.jsonl"

    def row_problem(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        choices = tuple(require(row, "choices", where))
        gold = require(row, "answer", where)
        if gold not in LETTERS[: len(choices)]:
            raise ValueError(f"{where}: answer {gold!r} is not a letter of {len(choices)} choices")
        return Problem(
            id=f"{self.name}/{require(row, 'id', where)}",
            question=require(row, "question", where),
            gold=gold,
            choices=choices,
            metadata=dict(meta),
        )
