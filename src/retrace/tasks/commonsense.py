"""Commonsense multiple choice: CommonsenseQA, WinoGrande, OpenBookQA, PIQA.

Each loader maps its file layout to choices plus a letter gold. Mirror files:
  commonsenseqa/dev_rand_split.jsonl   {"question": {"stem", "choices": [{label,text}]}, "answerKey"}
  winogrande/dev.jsonl                 {"sentence", "option1", "option2", "answer": "1"|"2"}
  openbookqa/dev.tsv                   ID, Question Stem, Choices "(A) .. (D) ..", ..., Answer Key
  piqa/valid.jsonl + valid-labels.lst  {"goal", "sol1", "sol2"} and one 0/1 label a line
"""

from __future__ import annotations

import csv
import logging
import re
from pathlib import Path

from retrace.tasks._choice import ChoiceTask
from retrace.tasks.base import LETTERS, iter_jsonl, register, require, source_file
from retrace.util.records import Problem

log = logging.getLogger(__name__)


def letter_of(label: str, n: int, where: str, base: int = 0) -> str:
    """The letter for `label`, which is a letter or a `base`-indexed number."""
    label = str(label).strip()
    index = int(label) - base if label.isdigit() else LETTERS.find(label.upper())
    if not 0 <= index < n:
        raise ValueError(f"{where}: answer {label!r} is not one of {n} choices")
    return LETTERS[index]


@register("commonsenseqa")
class CommonsenseQA(ChoiceTask):
    def row_problem(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        q = require(row, "question", where)
        stem = require(q, "stem", where)
        choices = require(q, "choices", where)
        labels = [c["label"] for c in choices]
        gold = require(row, "answerKey", where)
        if gold not in labels:
            raise ValueError(f"{where}: answerKey {gold!r} not among labels {labels}")
        return Problem(
            id=f"{self.name}/{row.get('id', index)}",
            question=stem.strip(),
            gold=LETTERS[labels.index(gold)],
            choices=tuple(c["text"] for c in choices),
            metadata=dict(meta),
        )

    def from_hub_row(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        # tau/commonsense_qa: question (str), choices {label: [...], text: [...]}, answerKey.
        choices = require(row, "choices", where)
        q = {
            "stem": row.get("question"),
            "choices": [{"label": l, "text": t} for l, t in zip(choices["label"], choices["text"])],
        }
        return self.row_problem(dict(row, question=q), index, where, meta)


@register("winogrande")
class WinoGrande(ChoiceTask):
    # The question is a sentence with a blank "_"; its template says to fill it.
    default_template = "winogrande_cot.j2"

    def row_problem(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        sentence = require(row, "sentence", where)
        choices = (require(row, "option1", where), require(row, "option2", where))
        gold = letter_of(require(row, "answer", where), 2, where, base=1)
        return Problem(
            id=f"{self.name}/{row.get('qID', index)}",
            question=sentence.strip(),
            gold=gold,
            choices=choices,
            metadata=dict(meta),
        )


@register("openbookqa")
class OpenBookQA(ChoiceTask):
    CHOICE = re.compile(r"\(([A-D])\)\s*")
    skips_lines = True

    def read_file(self, cfg: dict, root: Path, source: str) -> tuple[list[Problem], list[Path]]:
        """The file's rows; a line listed in the config's `skip_lines` (train.tsv:3334 holds five
        choices) is left out with one log line naming it, and must be malformed: a listed line
        that reads fine, or is not in the file, is an error (the list cannot go stale silently)."""
        path, label = source_file(cfg, root, source)
        skip, skipped, problems = set(cfg.get("skip_lines") or ()), set(), []
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            for row in reader:
                where, line = f"{path}:{reader.line_num}", reader.line_num
                try:
                    problems.append(self.tsv_problem(row, where, {"source": label, "line": line}))
                except ValueError as e:
                    if line not in skip:
                        raise
                    log.warning("skipped %s (skip_lines): %s", where, str(e).removeprefix(where + ": "))
                    skipped.add(line)
                    continue
                if line in skip:
                    raise ValueError(
                        f"{where}: listed in skip_lines but reads fine; remove it from the config"
                    )
        if skip - skipped:
            raise ValueError(f"{path}: skip_lines {sorted(skip - skipped)} are not lines of the file")
        return problems, [path]

    def tsv_problem(self, row: dict, where: str, meta: dict) -> Problem:
        parts = self.CHOICE.split(require(row, "Choices", where))
        letters, texts = parts[1::2], [t.strip() for t in parts[2::2]]
        if letters != list("ABCD"):
            raise ValueError(f"{where}: expected choices (A) to (D), got {letters}")
        gold = letter_of(require(row, "Answer Key", where), 4, where)
        return Problem(
            id=f"{self.name}/{require(row, 'ID', where)}",
            question=require(row, "Question Stem", where).strip(),
            gold=gold,
            choices=tuple(texts),
            metadata=meta,
        )

    def from_hub_row(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        # allenai/openbookqa "main": id, question_stem, choices {text, label}, answerKey.
        choices = require(row, "choices", where)
        return Problem(
            id=f"{self.name}/{row.get('id', index)}",
            question=row["question_stem"],
            gold=letter_of(require(row, "answerKey", where), 4, where),
            choices=tuple(choices["text"]),
            metadata=meta,
        )


@register("piqa")
class PIQA(ChoiceTask):
    def source_files(self, cfg: dict, root: Path, source: str) -> list[Path]:
        return [source_file(cfg, root, source)[0], source_file(cfg, root, source, key="labels_path")[0]]

    def read_file(self, cfg: dict, root: Path, source: str) -> tuple[list[Problem], list[Path]]:
        path, label = source_file(cfg, root, source)
        labels_path, _ = source_file(cfg, root, source, key="labels_path")
        labels = labels_path.read_text(encoding="utf-8").split()
        rows = list(iter_jsonl(path))
        if len(labels) != len(rows):
            raise ValueError(f"{labels_path}: {len(labels)} labels for {len(rows)} rows in {path}")
        problems = [
            self.row_problem(dict(row, label=lab), i, f"{path}:{lineno}", {"source": label, "line": lineno})
            for i, ((lineno, row), lab) in enumerate(zip(rows, labels))
        ]
        return problems, [path, labels_path]

    def row_problem(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        # PIQA labels are 0/1 for sol1/sol2 (https://yonatanbisk.com/piqa/, data README).
        choices = (require(row, "sol1", where), require(row, "sol2", where))
        gold = letter_of(row.get("label", ""), 2, where)
        return Problem(
            id=f"{self.name}/{row.get('id', index)}",
            question=require(row, "goal", where).strip(),
            gold=gold,
            choices=choices,
            metadata=dict(meta),
        )
