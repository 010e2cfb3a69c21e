"""ASDiv (Miao et al., 2020): English maths word problems of grade 1-6, a body and a question.

Mirror file: `asdiv/test.jsonl`, the 2,215-row filtered copy of Qwen2.5-Math
(QwenLM/Qwen2.5-Math@a45202bd:evaluation/data/asdiv/test.jsonl; see the mirror's SOURCES.md).
The question is the body then the question, and the gold drops the unit in parentheses
("9 (apples)" -> "9"), as Qwen2.5-Math's evaluation does (evaluation/parser.py,
`parse_question` / `parse_ground_truth`, data_name "asdiv"). Rows whose gold is not a number
("Yes", "3:30 p.m.", "Bryan": 123 of the 2,215) are skipped: the maths checker compares numbers.
"""

from __future__ import annotations

import re
from pathlib import Path

from retrace.tasks._math import MathTask
from retrace.tasks.base import iter_jsonl, register, require, source_file
from retrace.util.records import Problem

UNIT = re.compile(r"\(.*?\)")
NUMERIC = re.compile(r"^-?\d+(?:\.\d+)?(?:/\d+)?$")


def asdiv_gold(answer: str) -> str | None:
    """The gold without its unit ("9 (apples)" -> "9", "1,200 (m)" -> "1200"); None if not a number."""
    gold = UNIT.sub("", answer).strip().replace(",", "")
    return gold if NUMERIC.match(gold) else None


@register("asdiv")
class ASDiv(MathTask):
    def read_file(self, cfg: dict, root: Path, source: str) -> tuple[list[Problem], list[Path]]:
        """Every row with a numeric gold; ids keep the file's own `idx`."""
        path, label = source_file(cfg, root, source, default=self.bundled_file)
        problems = []
        for i, (lineno, row) in enumerate(iter_jsonl(path)):
            if asdiv_gold(str(row.get("answer", ""))) is None:
                continue
            meta = {"source": label, "line": lineno}
            problems.append(self.checked_problem(row, i, f"{path}:{lineno}", meta))
        return problems, [path]

    def row_problem(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        body, question = require(row, "body", where), require(row, "question", where)
        gold = asdiv_gold(str(require(row, "answer", where)))
        if gold is None:
            raise ValueError(f"{where}: answer {row['answer']!r} is not a number")
        native = row.get("idx", index)
        meta = dict(meta, solution_type=row.get("solution_type", ""))
        return Problem(
            id=f"{self.name}/{native}",
            question=f"{body.strip()} {question.strip()}",
            gold=gold,
            metadata=meta,
        )
