"""The gold-leak check: no prompt and no DM input may carry the gold answer of its question.

Why: the upstream DRR code injects the ground truth into a final turn and its cleaning regex
leaves it in some discriminator inputs (issue 4), so the DM can learn to read the answer key
instead of judging behaviour. Every stored prompt and every DM row passes through here.

    findings = scan_record(record, problem)                         # one stored prompt / DM row
    report = scan_files(["results/drr/.../prompts.jsonl"], problems) # verdict pass|fail|incomplete
    python -m retrace leakcheck --jsonl FILE                         # your own prompts (main)

Each piece of text the harness wrote (system/user messages, instructions, environment feedback,
any DM-row field that is not the reasoner's own answer/rationale) is read by
retrace.drr.leak_text.scan_text, whose docstring lists what counts as stating the gold
(`answer_statement`, `index_text`, `option_text`) and which places are blanked first: the
question, its choice listing, DRR's template text, any `allowed` text the caller names, and the
reasoner's own output echoed back (rendered by dataset.render_context, the one renderer of the
feedback message). This module adds one kind of its own:
4. `rejected_attempt_is_gold` (DM training rows only): a past attempt in the context names the
   gold. Algorithm 1 only re-prompts after a wrong answer, so every context attempt of a
   distillation row was rejected; one that equals the gold is an injected or mislabelled turn.

What it cannot catch (say so in the report), beyond leak_text's list:
- Text inside the reasoner's own answer/rationale fields, and their verbatim echoes in a
  re-prompt, is trusted (a correct answer names the gold by construction); a gold planted
  *into* those fields is missed except by (4). An echo rendered another way than
  render_context is scanned whole (a rejected-but-correct attempt in it is then reported: a
  false positive, on the safe side).
- Leakage through labels or ordering (e.g. the Accept row always last) rather than text.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from retrace.drr.dm_data import judged_text
from retrace.drr.leak_text import INDEX_BASES, MIN_CHARS, names_gold, scan_text, squash
from retrace.drr.prompts import render_context
from retrace.tasks.base import LETTERS, iter_jsonl
from retrace.util.atomic import read_jsonl
from retrace.util.records import Problem

MODEL_FIELDS = ("answer", "rationale")  # the reasoner's own output: trusted, not scanned
META_FIELDS = (
    "row_id",
    "id",
    "problem_id",
    "dataset",
    "turn",
    "label",
    "verdict",
    "decision",
    "status",
    "correct",
    "label_shuffled",
    "role",
    "key",
    "tag",
    "gold",
    "choices",
    "allowed",
)


@dataclass(frozen=True)
class Finding:
    """One leak: where it is (file, 1-based line, row id, field) and what matched."""

    file: str
    line: int | None
    row_id: str
    problem_id: str
    field: str
    kind: str  # answer_statement | index_text | option_text | rejected_attempt_is_gold
    excerpt: str


def _harness_fields(row: Mapping, prefix: str = "") -> Iterable[tuple[str, str]]:
    """(field path, text) of every string the harness wrote in a row (skips model/meta fields)."""
    for key, value in row.items():
        if key in MODEL_FIELDS or key in META_FIELDS:
            continue
        if isinstance(value, str):
            yield prefix + key, value
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, Mapping):
                    yield from _message_or_row(item, f"{prefix}{key}[{i}]")
                elif isinstance(item, str):
                    yield f"{prefix}{key}[{i}]", item


def _message_or_row(item: Mapping, path: str) -> Iterable[tuple[str, str]]:
    if "role" in item and "content" in item:  # a chat message: the assistant's is model text
        if item["role"] != "assistant":
            yield f"{path}.{item['role']}", str(item["content"])
        return
    yield from _harness_fields(item, path + ".")


def _model_spans(record: Mapping) -> list[str]:
    """Verbatim renderings of the reasoner's own output that harness text may echo: assistant
    messages, the record's past attempts as render_context prints them (either strategy), and
    the judged answer as the DM input prints it; a long rationale also alone."""
    past = [
        {"answer": c["answer"], "rationale": c.get("rationale", "")}
        for c in record.get("context") or ()
        if isinstance(c, Mapping) and "answer" in c
    ]
    spans = [
        str(m.get("content", ""))
        for m in record.get("messages") or ()
        if isinstance(m, Mapping) and m.get("role") == "assistant"
    ]
    if past:
        spans += [render_context(past, s) for s in ("exploration", "gradual")]
    if "answer" in record:
        spans.append(judged_text(record["answer"], record.get("rationale", "")))
    now = (
        [{"answer": record["answer"], "rationale": record.get("rationale", "")}] if "answer" in record else []
    )
    spans += [str(a["rationale"]) for a in past + now if len(squash(str(a["rationale"]))) >= 12]
    return spans


def scan_record(
    record: Mapping,
    problem: Problem,
    file: str = "",
    line: int | None = None,
    index_bases: Iterable[int] = INDEX_BASES,
    min_chars: int = MIN_CHARS,
    allowed: Sequence[str] = (),
) -> list[Finding]:
    """Every leak in one stored prompt record ({"messages"} or {"prompt"}/{"text"}) or DM row;
    `allowed` texts (and the record's own "allowed" list) may hold the gold."""
    row_id = str(record.get("row_id") or record.get("key") or record.get("id") or "")
    spans = _model_spans(record) + list(allowed) + [str(s) for s in record.get("allowed") or ()]
    found = [
        Finding(file, line, row_id, problem.id, field, kind, excerpt)
        for field, text in _harness_fields(record)
        for kind, excerpt in scan_text(text, problem, index_bases, min_chars, spans)
    ]
    if "label" in record:  # a DM training row: its past attempts were all rejected
        for i, past in enumerate(record.get("context") or ()):
            if isinstance(past, Mapping) and names_gold(str(past.get("answer", "")), problem):
                found.append(
                    Finding(
                        file,
                        line,
                        row_id,
                        problem.id,
                        f"context[{i}].answer",
                        "rejected_attempt_is_gold",
                        str(past.get("answer"))[:80],
                    )
                )
    return found


def _problem_id(record: Mapping) -> str | None:
    pid = record.get("problem_id", record.get("id"))
    return None if pid is None else str(pid)


def scan_records(
    records: Iterable[Mapping],
    problems: Mapping[str, Problem],
    file: str = "",
    index_bases: Iterable[int] = INDEX_BASES,
    min_chars: int = MIN_CHARS,
) -> dict:
    """{"findings", "n_records", "unchecked"}; a record whose problem is unknown is unchecked."""
    findings, unchecked, n = [], [], 0
    for line, record in enumerate(records, 1):
        n += 1
        problem = problems.get(_problem_id(record) or "")
        if problem is None:
            unchecked.append({"file": file, "line": line, "problem_id": _problem_id(record)})
            continue
        findings += scan_record(record, problem, file, line, index_bases, min_chars)
    return {"findings": findings, "n_records": n, "unchecked": unchecked}


def scan_files(
    paths: Iterable[str | Path],
    problems: Iterable[Problem],
    index_bases: Iterable[int] = INDEX_BASES,
    min_chars: int = MIN_CHARS,
) -> dict:
    """Scan JSONL files of prompts / DM rows; returns `verdict(...)` with the findings.

    Line numbers count non-blank JSON lines (blank lines are skipped by read_jsonl).
    """
    by_id = {p.id: p for p in problems}
    findings, unchecked, n = [], [], 0
    for path in paths:
        out = scan_records(read_jsonl(path), by_id, str(path), index_bases, min_chars)
        findings += out["findings"]
        unchecked += out["unchecked"]
        n += out["n_records"]
    return verdict(findings, n, unchecked)


def verdict(findings: list[Finding], n_records: int, unchecked: list | None = None) -> dict:
    """{"verdict": "pass"|"fail"|"incomplete", counts, findings as dicts}.

    fail: any finding; incomplete: no finding but some record had no known problem (so its
    gold could not be checked); pass: every record checked and clean.
    """
    unchecked = unchecked or []
    by_kind: dict[str, int] = {}
    for f in findings:
        by_kind[f.kind] = by_kind.get(f.kind, 0) + 1
    status = "fail" if findings else ("incomplete" if unchecked else "pass")
    return {
        "verdict": status,
        "n_records": n_records,
        "n_findings": len(findings),
        "n_rows_with_findings": len({(f.file, f.line, f.row_id) for f in findings}),
        "by_kind": by_kind,
        "n_unchecked": len(unchecked),
        "unchecked": unchecked[:20],
        "findings": [asdict(f) for f in findings],
    }


# ---------------------------------------------------------------- `retrace leakcheck --jsonl FILE`
def check_jsonl_record(record: Mapping, where: str) -> dict:
    """{"leak": bool, "findings": [...]} of one {"text", "choices", "gold"} record (gold: the
    0-based index of the right choice, or the answer text when there are no choices; optional
    "question" and "allowed": texts that may hold the gold, e.g. your template's fixed text)."""
    for key in ("text", "gold"):
        if key not in record:
            raise ValueError(f"{where}: no {key!r} field (need text, choices, gold)")
    choices = tuple(str(c) for c in record.get("choices") or ())
    gold = record["gold"]
    if choices:
        if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < len(choices):
            raise ValueError(f"{where}: gold {gold!r} is not a 0-based index into {len(choices)} choices")
        gold = LETTERS[gold]
    problem = Problem(id=where, question=str(record.get("question") or ""), gold=str(gold), choices=choices)
    found = scan_record(
        {"text": str(record["text"]), "allowed": list(record.get("allowed") or ())}, problem, line=None
    )
    return {"leak": bool(found), "findings": [{"kind": f.kind, "excerpt": f.excerpt} for f in found]}


def main(argv: list[str]) -> int:
    """`retrace leakcheck --jsonl FILE`: one JSON line per record, {"line", "leak", "findings"};
    exit status 1 when any record leaks."""
    ap = argparse.ArgumentParser(
        prog="retrace leakcheck",
        description='Check prompts for their gold answer: JSONL records {"text", "choices", "gold"} '
        '(gold = 0-based index of the right choice; optional "question", "allowed": texts that may '
        "hold the gold).",
    )
    ap.add_argument("--jsonl", type=Path, required=True, help="records to check, one JSON object a line")
    a = ap.parse_args(argv)
    leaks = 0
    for n, record in iter_jsonl(a.jsonl):  # a line that is not a JSON object names file:line
        out = check_jsonl_record(record, f"{a.jsonl}:{n}")
        leaks += out["leak"]
        print(json.dumps({"line": n, **out}, ensure_ascii=False))
    print(f"leakcheck: {leaks} of the records in {a.jsonl} leak their gold", file=sys.stderr)
    return 1 if leaks else 0
