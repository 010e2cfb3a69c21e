"""Competition maths with short final answers: MATH-500, AIME 2024/2025, AMC 2023, OlympiadBench.

All are JSON lines with a problem text and a final answer; they differ in field names
and answer encodings, handled here. Mirror files: see config/dataset/<name>.yaml.
"""

from __future__ import annotations

from retrace.tasks._math import MathTask
from retrace.tasks.base import first_of, number_text, register
from retrace.util.records import Problem

QUESTION_KEYS = ("problem", "question", "Problem")
ANSWER_KEYS = ("answer", "Answer")


class CompetitionMath(MathTask):
    """A problem/answer JSONL; `id_key` names the native id field if the data has one."""

    id_key: str | None = "id"
    extra_keys: tuple[str, ...] = ()

    def row_problem(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        question = str(first_of(row, QUESTION_KEYS, where)).strip()
        gold = self.gold(row, where)
        native = row.get(self.id_key) if self.id_key else None
        meta = dict(meta, **{k: row[k] for k in self.extra_keys if k in row})
        return Problem(
            id=f"{self.name}/{native if native is not None else index}",
            question=question,
            gold=gold,
            metadata=meta,
        )

    def gold(self, row: dict, where: str) -> str:
        # AMC/AIME mirrors store answers as floats ("27.0"); math-verify would accept
        # either, but "27" reads better in reports.
        return number_text(first_of(row, ANSWER_KEYS, where))


@register("math500")
class Math500(CompetitionMath):
    id_key = "unique_id"
    extra_keys = ("subject", "level")


@register("aime24")
class AIME24(CompetitionMath):
    pass


@register("aime25")
class AIME25(CompetitionMath):
    pass


@register("amc23")
class AMC23(CompetitionMath):
    extra_keys = ("url",)


@register("olympiadbench")
class OlympiadBench(CompetitionMath):
    extra_keys = ("subfield", "answer_type", "unit", "is_multiple_answer")

    def row_problem(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        problem = super().row_problem(row, index, where, meta)
        if row.get("context"):  # a shared preamble some items have; keep it with the question
            problem = Problem(
                problem.id,
                f"{row['context'].strip()}\n\n{problem.question}",
                problem.gold,
                None,
                problem.metadata,
            )
        return problem

    def gold(self, row: dict, where: str) -> str:
        """`final_answer` is a one-element list such as ["$\\frac{1}{2}$"] or ["$69$,$84$"].

        Qwen2.5-Math's evaluation takes `final_answer[0].strip("$")`
        (https://github.com/QwenLM/Qwen2.5-Math/blob/main/evaluation/parser.py,
        parse_ground_truth). We drop every "$" instead, so multi-answer rows such as
        "$69$,$84$" become "69,84" rather than "69$,$84". A longer list is joined by ", ".
        """
        answers = first_of(row, ("final_answer",), where)
        if isinstance(answers, str):
            answers = [answers]
        gold = ", ".join(str(a).replace("$", "").strip() for a in answers)
        if not gold:
            raise ValueError(f"{where}: empty 'final_answer'")
        return gold
