"""MMLU (Hendrycks et al.): one headerless CSV per subject and split.

Mirror layout: `mmlu/<split>/<subject>_<split>.csv`, rows `question, A, B, C, D, letter`
(https://github.com/hendrycks/test, the original release). Config: `split` (dev | val |
test) and `subjects` (a list, or "all"). Hub: `cais/mmlu` rows (question, subject,
choices [4], answer 0-3).
"""

from __future__ import annotations

import csv
from pathlib import Path

from retrace.tasks._choice import ChoiceTask
from retrace.tasks.base import LETTERS, register, source_file
from retrace.util.records import Problem


def subject_files(cfg: dict, root: Path, source: str) -> list[tuple[str, Path, str]]:
    split = cfg["split"]
    base = cfg.get("mirror_path") or "mmlu"
    subjects = cfg.get("subjects") or "all"
    if subjects == "all":
        folder, _ = source_file(dict(cfg, mirror_path=f"{base}/{split}"), root, source)
        subjects = sorted(p.name[: -len(f"_{split}.csv")] for p in folder.glob(f"*_{split}.csv"))
    return [
        (s, *source_file(dict(cfg, mirror_path=f"{base}/{split}/{s}_{split}.csv"), root, source))
        for s in subjects
    ]


@register("mmlu")
class MMLU(ChoiceTask):
    def source_files(self, cfg: dict, root: Path, source: str) -> list[Path]:
        return [path for _, path, _ in subject_files(cfg, root, source)]

    def read_file(self, cfg: dict, root: Path, source: str) -> tuple[list[Problem], list[Path]]:
        problems, files = [], []
        for subject, path, label in subject_files(cfg, root, source):
            with open(path, encoding="utf-8", newline="") as f:
                reader = csv.reader(f)
                problems += [
                    self.csv_problem(
                        row,
                        subject,
                        i,
                        f"{path}:{reader.line_num}",
                        {"source": label, "line": reader.line_num, "subject": subject},
                    )
                    for i, row in enumerate(reader)
                ]
            files.append(path)
        return problems, files

    def csv_problem(self, row: list[str], subject: str, i: int, where: str, meta: dict) -> Problem:
        if len(row) != 6:
            raise ValueError(f"{where}: expected 6 columns (question, A-D, answer), got {len(row)}")
        if row[5].strip() not in LETTERS[:4]:
            raise ValueError(f"{where}: answer {row[5]!r} is not A-D")
        return Problem(
            id=f"{self.name}/{subject}/{i}",
            question=row[0].strip(),
            gold=row[5].strip(),
            choices=tuple(row[1:5]),
            metadata=meta,
        )

    def load_hub(self, cfg: dict) -> list[Problem]:
        # cais/mmlu's "all" config holds every subject; keep the configured ones.
        subjects = cfg.get("subjects") or "all"
        problems = super().load_hub(cfg)
        return (
            problems if subjects == "all" else [p for p in problems if p.metadata["subject"] in set(subjects)]
        )

    def from_hub_row(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        subject = row.get("subject", "unknown")
        return self.csv_problem(
            [row["question"], *row["choices"], LETTERS[int(row["answer"])]],
            subject,
            index,
            where,
            dict(meta, subject=subject),
        )
