"""GSM8K (grade-school maths word problems; gold after "####").

Mirror file: `gsm8k/test.jsonl` (openai/grade-school-math); hub: `openai/gsm8k`, config "main".
"""

from __future__ import annotations

from retrace.tasks._math import MathTask
from retrace.tasks.base import register, require
from retrace.util.records import Problem


def gsm8k_gold(solution: str, where: str) -> str:
    """The number after "####" with commas removed, as GSM8K's own `extract_answer`
    (https://github.com/openai/grade-school-math/blob/master/grade_school_math/dataset.py)."""
    if "####" not in solution:
        raise ValueError(f"{where}: answer has no '####' final-answer marker")
    gold = solution.rsplit("####", 1)[1].strip().replace(",", "")
    if not gold:
        raise ValueError(f"{where}: empty answer after '####'")
    return gold


@register("gsm8k")
class GSM8K(MathTask):
    def row_problem(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        question = require(row, "question", where)
        gold = gsm8k_gold(require(row, "answer", where), where)
        return Problem(id=f"{self.name}/{index}", question=question.strip(), gold=gold, metadata=dict(meta))
