"""The Task interface every dataset plugin implements, and the loading helpers they share.

A task turns a dataset config (a `config/dataset/*.yaml` mapping) into canonical
`Problem`s and judges model outputs:

    from retrace.util.registry import TASKS
    task = TASKS.get("gsm8k")
    problems, files = task.load(cfg, mirror="/path/to/mirror")
    answer = task.extract_answer(completion_text, problems[0])
    task.is_correct(answer, problems[0])
    task.extract(completion_text, problems[0])   # Extraction(answer, source): how it was found

Three sources, chosen by `cfg["source"]`: "mirror" (a file under the mirror directory,
at `cfg["mirror_path"]`; retrace.config.mirror says where the mirror is), "bundled" (a file in
`retrace/tasks/bundled/`, listed in its MANIFEST.yaml) and "hub" (`datasets.load_dataset` at
a pinned revision; `datasets` is imported only then).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

# MirrorMissing is re-exported: callers of Task.load catch it from here.
from retrace.config.mirror import MirrorMissing as MirrorMissing
from retrace.config.mirror import require as require_mirror
from retrace.util.records import Problem
from retrace.util.registry import TASKS
from retrace.util.templates import render

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


# How an answer was found, strongest first. "boxed": a complete \\boxed{...}; "statement": an
# explicit answer statement ("Answer: B", "#### 42", "the answer is 7"); "fallback": a guess
# from the text (the last number, a bold letter, the last line); "none": no answer (also an
# unclosed box: a truncated "\\boxed{3" is no answer). The paper-faithful vote counts only
# EXPLICIT sources (retrace.scoring.score).
SOURCES = ("boxed", "statement", "fallback", "none")
EXPLICIT = ("boxed", "statement")


class Extraction(NamedTuple):
    answer: str | None
    source: str  # one of SOURCES

    @property
    def path(self) -> str:
        """The rule that found the answer ("statement:bold", ...; `ruled`), else the source.
        results.csv counts them (column answer_paths), so a rule that never fires shows."""
        return getattr(self, "rule", None) or self.source


class _Ruled(Extraction):
    """An Extraction that also names its rule; compares equal to the plain (answer, source)."""


def ruled(answer: str | None, source: str, rule: str) -> Extraction:
    """Extraction(answer, source) whose `path` is `rule` (e.g. "statement:after-placeholder")."""
    found = _Ruled(answer, source)
    found.rule = rule  # type: ignore[attr-defined]
    return found


NO_ANSWER = Extraction(None, "none")

# The format placeholder a prompt asks the model to replace, echoed before the real answer:
# "Answer: [Provide the answer here] 3" (the DRR prompts' "Answer: [Provide the answer here]
# Rationale: [...]", paper Appendix B, prompts/drr/*.j2), "Answer: <your answer> dog"
# (prompts/exact_cot.j2). A bracket that holds words of the instruction, not a choice ("[B]").
ECHOED_PLACEHOLDER = re.compile(
    r"^\s*(?:\[[^\]\n]*\b(?:provide|your|answer|here)\b[^\]\n]*\]|<[^<>\n]*>)\s*", re.IGNORECASE
)


def after_placeholder(tail: str) -> tuple[str, bool]:
    """(`tail` without a leading echoed placeholder, whether there was one)."""
    m = ECHOED_PLACEHOLDER.match(tail)
    return (tail[m.end() :], True) if m else (tail, False)


class Task:
    """A dataset family: loading plus answer extraction and judging.

    Subclasses inherit `kind`, `default_template` and answer handling from a kind base
    (`_math.MathTask`, `_choice.ChoiceTask`, `_exact.ExactTask`) and implement
    `row_problem` (one JSON row → Problem), overriding `read_file` for other layouts
    and `from_hub_row` where hub rows differ from the mirror files. `name` is set
    when the instance is registered.
    """

    name: str = ""
    kind: str = ""
    default_template: str = ""
    bundled_file: str | None = None  # file in bundled/ used when the config names none
    skips_lines = False  # whether read_file honours the dataset config's `skip_lines`

    def load(self, cfg: dict, mirror: Path | str | None) -> tuple[list[Problem], list[Path]]:
        """Problems named by `cfg`, plus the source files read (for provenance)."""
        source = cfg["source"]
        if source == "hub":
            return self.load_hub(cfg), []
        if source not in ("mirror", "bundled"):
            raise ValueError(
                f"dataset {cfg.get('name', self.name)!r}: unknown source {source!r}; "
                "expected mirror, bundled or hub"
            )
        root = require_mirror(mirror, cfg.get("name", self.name)) if source == "mirror" else BUNDLED_DIR
        return self.read_file(cfg, root, source)

    def source_files(self, cfg: dict, root: Path, source: str) -> list[Path]:
        """The files `read_file` opens under `root`, found without reading them: the data
        rule's key hashes them (retrace.planning.sources), so a changed file reruns its data
        job. A plugin that overrides `read_file` to open other files overrides this too
        (tests/unit/test_data_sources.py checks both agree for every shipped dataset)."""
        return [source_file(cfg, root, source, default=self.bundled_file)[0]]

    def read_file(self, cfg: dict, root: Path, source: str) -> tuple[list[Problem], list[Path]]:
        """Default file reader: one JSON object per line, each turned by `row_problem`."""
        path, label = source_file(cfg, root, source, default=self.bundled_file)
        problems = [
            self.checked_problem(row, i, f"{path}:{lineno}", {"source": label, "line": lineno})
            for i, (lineno, row) in enumerate(iter_jsonl(path))
        ]
        return problems, [path]

    def checked_problem(
        self, row: dict, index: int, where: str, meta: dict, reader: Callable | None = None
    ) -> Problem:
        """`row_problem`, with a field of the wrong type reported at `where` (file:line)
        instead of failing later, far from the row, or being written out as is."""
        try:
            problem = (reader or self.row_problem)(row, index, where, meta)
        except (TypeError, AttributeError, KeyError) as e:
            raise ValueError(f"{where}: malformed row ({type(e).__name__}: {e})") from None
        check_types(problem, where)
        return problem

    def load_hub(self, cfg: dict) -> list[Problem]:
        hub = cfg.get("hub") or {}
        rows, commit = load_hub_rows(hub)
        label = f"hub:{hub['path']}@{commit}[{hub.get('split')}]"
        return [
            self.checked_problem(
                dict(row), i, f"{label}#{i}", {"source": label, "index": i}, reader=self.from_hub_row
            )
            for i, row in enumerate(rows)
        ]

    def from_hub_row(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        """Default: hub rows have the same fields as the mirror files."""
        return self.row_problem(row, index, where, meta)

    def row_problem(self, row: dict, index: int, where: str, meta: dict) -> Problem:
        """One canonical Problem from one source row; `where` ("file:line") names errors."""
        raise NotImplementedError(f"task {self.name!r} has no row reader")

    def prompt(self, problem: Problem, template: str | None = None) -> str:
        """The user-turn text for `problem`, rendered from `template` (default: the task's)."""
        choices = list(zip(LETTERS, problem.choices)) if problem.choices else None
        return render(template or self.default_template, question=problem.question, choices=choices)

    def extract(self, text: str, problem: Problem) -> Extraction:
        """The answer and how it was found (see SOURCES)."""
        raise NotImplementedError

    def extract_answer(self, text: str, problem: Problem) -> str | None:
        """The answer of any source (fallbacks included), or None."""
        return self.extract(text, problem).answer

    def is_correct(self, answer: str | None, problem: Problem) -> bool:
        raise NotImplementedError

    def same_answer(self, a: str, b: str) -> bool:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<task {self.name or type(self).__name__} ({self.kind})>"


def register(name: str):
    """Class decorator: register one instance of the class as task `name`."""

    def decorator(cls: type[Task]) -> type[Task]:
        instance = cls()
        instance.name = name
        TASKS.register(name)(instance)
        return cls

    return decorator


def source_file(
    cfg: dict, root: Path, source: str, default: str | None = None, key: str | None = None
) -> tuple[Path, str]:
    """(absolute path, portable label) of the data file named by `cfg[key]`
    (default key: `bundled_path` for bundled sets, else `mirror_path`).

    The label ("mirror:gsm8k/test.jsonl") goes into problem metadata instead of the
    absolute path, so a problem's fingerprint does not depend on where the mirror lives.
    """
    key = key or ("bundled_path" if source == "bundled" else "mirror_path")
    rel = cfg.get(key) or default
    if not rel:
        raise ValueError(f"dataset {cfg.get('name')!r}: no {key!r} given")
    path = root / rel
    if not path.exists():
        raise FileNotFoundError(f"{path}: not found (dataset {cfg.get('name')!r}, {key}={rel!r})")
    return path, f"{source}:{rel}"


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, row) for each non-blank line; a malformed line names file:line."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"{path}:{lineno}: not UTF-8 (byte {raw[e.start]:#04x} at column {e.start + 1})"
                ) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: malformed JSON line: {e.msg}") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object")
            yield lineno, row


def check_types(problem: Problem, where: str) -> None:
    """Question, gold and id are text; choices (if any) a list of texts."""
    for name in ("id", "question", "gold"):
        value = getattr(problem, name)
        if not isinstance(value, str):
            raise ValueError(f"{where}: {name} is {type(value).__name__} {value!r:.40}, expected text")
    if problem.choices is not None and not all(isinstance(c, str) for c in problem.choices):
        raise ValueError(f"{where}: choices must all be text, got {list(problem.choices)!r:.80}")


def require(row: dict, key: str, where: str) -> Any:
    """row[key], or ValueError "<file>:<line>: missing 'key'"."""
    value = row.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ValueError(f"{where}: missing {key!r}")
    return value


def first_of(row: dict, keys: tuple[str, ...], where: str) -> Any:
    """The first present, non-empty field among `keys` (datasets disagree on names)."""
    for key in keys:
        if row.get(key) not in (None, ""):
            return row[key]
    raise ValueError(f"{where}: missing {' or '.join(repr(k) for k in keys)}")


def load_hub_rows(hub: dict) -> tuple[Any, str]:
    """(rows, commit) from the hub at a pinned or locked revision (retrace.store.data.load_hub_rows)."""
    from retrace.store.data import load_hub_rows as load  # data imports the registry this module fills

    return load(hub)


def number_text(value: Any) -> str:
    """A gold number as text: 27.0 → "27" (AMC/AIME files store floats), else str()."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()
