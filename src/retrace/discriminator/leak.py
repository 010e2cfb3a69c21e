"""The gold-leak check: no prompt and no DM input may carry the gold answer of its question.

Why: the upstream DRR code injects the ground truth into a final turn and its cleaning regex
leaves it in some discriminator inputs (issue 4), so the DM can learn to read the answer key
instead of judging behaviour. Every stored prompt and every DM row passes through here.

    findings = scan_file("results/drr/dm_train.jsonl", problems)   # problems: {id: Problem}
    report = verdict(findings, n_records=..., n_unchecked=...)        # or scan_files(...)

What counts as a leak, in text the harness wrote (system/user messages, instructions,
environment feedback, any DM-row field that is not the reasoner's own answer/rationale),
compared after normalising case and whitespace. The gold can be stated as its letter ("B"),
its index (0-based by default: the paper's prompts number choices 0, 1, 2 and ask for "your
choice (e.g., 0, 1, 2, etc)", Appendix B), its option text ("Jupiter") or index and text
together ("1. Jupiter"), with or without a cue word ("Answer:", "Hint:", "Key:", "Correct:",
"ground truth", "the right option is", ... see CUE):
1. `option_text`: the gold option's text (multiple choice) or the gold itself (open-ended),
   as whole words, anywhere outside the question and its full choice listing.
2. `index_text`: a choice marker naming the gold followed by the gold's text ("1. Jupiter",
   "(B) Jupiter", "Answer: 1. Jupiter") outside the full listing, whatever the text's length.
3. `answer_statement`: a cue word followed by the gold's letter or index: "answer is B",
   "Answer: (B)", "Hint: 1", "Key = B", "Correct: 1", "gold label = B". The letter must be
   upper case (or bracketed); for the letters "A" and "I", which are English words, it must
   also be followed by punctuation, a bracket or the end of a line, so "The answer: A
   student..." does not trigger while "the answer is A." does.
   A bare letter or bare index without a cue never triggers: instructions are full of them
   ("option B", "plan B", "turn 1", "(e.g., 0, 1, 2, etc)"), and without a cue or the
   option's text they state nothing a reader could take for the key.
4. `rejected_attempt_is_gold` (DM training rows only): a past attempt in the context names the
   gold. Algorithm 1 only re-prompts after a wrong answer, so every context attempt of a
   distillation row was rejected; one that equals the gold is an injected or mislabelled turn.

What it cannot catch (say so in the report):
- Text inside the reasoner's own answer/rationale fields, and their verbatim echoes in a
  re-prompt (assistant messages, past attempts rendered as Appendix B prints them), is
  trusted (a correct answer names the gold by construction); a gold planted *into* those
  fields is missed except by (4). A re-prompt that renders past attempts in another wording
  than `dataset.render_context` is scanned whole, so a rejected-but-correct inference
  attempt echoed in it is reported (a false positive, on the safe side).
- Paraphrases, translations, the gold encoded another way (an index under a numbering the
  caller did not declare in `index_bases`, "the second option", "the capital of France"),
  a cue word outside CUE.
- Option texts shorter than `min_chars` (default 3: "no", "it") are not searched alone,
  since they occur in any instruction; only statements (2, 3) cover them.
- Only a choice listing that names every choice in order is recognised as the question's
  own; a partial listing that includes the gold is reported (a false positive, safe side).
- Leakage through labels or ordering (e.g. the Accept row always last) rather than text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from retrace.atomic import read_jsonl
from retrace.discriminator.dataset import render_context
from retrace.records import Problem

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MIN_CHARS = 3
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
)
INDEX_BASES = (0,)  # the DRR prompts number choices from 0 (Appendix B)
# An explicit answer statement's lead-in ("answer is", "Answer:", "correct option =", "ground
# truth:", "Hint:", "Key:", "Correct:"); the answer forms are the family tasks/_choice.py parses
# as a model's committed answer, the bare cue words those answer keys and injected hints use.
CUE = (
    r"(?i:\b(?:(?:the\s+)?(?:correct|right|best|final|true|gold(?:en)?|expected|target|reference)"
    r"\s+(?:answer|option|choice|label|index|response)|answer(?:\s+key)?|ground[\s_-]*truth|"
    r"gold(?:en)?|label|solution|hint|key|correct|right|truth|target)\b"
    r"(?:\s+(?:is|was|would\s+be|should\s+be|=))?\s*[:=\-–]?\s*)"
)
MARK_END = r"\s*[.):\]\-]\s*"  # after a choice marker: "1." "(B)" "2:" "C -"


@dataclass(frozen=True)
class Finding:
    """One leak: where it is (file, 1-based line, row id, field) and what matched."""

    file: str
    line: int | None
    row_id: str
    problem_id: str
    field: str
    kind: str  # option_text | answer_statement | rejected_attempt_is_gold
    excerpt: str


def normalise(text: str) -> str:
    """Lower case, markdown emphasis removed, whitespace collapsed (the comparison form)."""
    return " ".join(text.replace("*", "").lower().split())


def gold_letter(problem: Problem) -> str | None:
    """The gold choice letter of a multiple-choice problem, else None."""
    g = problem.gold.strip().upper()
    return g if problem.choices and len(g) == 1 and g in LETTERS[: len(problem.choices)] else None


def gold_text(problem: Problem) -> str:
    """The gold option's text (multiple choice) or the gold answer itself (open-ended)."""
    letter = gold_letter(problem)
    return problem.choices[LETTERS.index(letter)] if letter else problem.gold


def _indices(problem: Problem, index_bases: Iterable[int]) -> list[str]:
    letter = gold_letter(problem)
    return [str(LETTERS.index(letter) + b) for b in index_bases] if letter else []


def statement_pattern(problem: Problem, index_bases: Iterable[int] = INDEX_BASES) -> re.Pattern:
    """A cue word followed by the gold (its letter, or its index under each of index_bases)."""
    letter = gold_letter(problem)
    if letter is None:  # open-ended: "answer is 42", "answer: Paris"
        return re.compile(CUE + r"[(\[$]?" + re.escape(normalise(problem.gold)) + r"(?!\w)", re.IGNORECASE)
    # Upper-case letter; "A"/"I" must end their clause (they are English words otherwise).
    tail = r"(?=\s*(?:[.,;:!?)\]*]|$))" if letter in "AI" else r"(?![A-Za-z0-9])"
    names = [rf"\*{{0,2}}{letter}{tail}", rf"[(\[]\s*(?i:{letter})\s*[)\]]"]
    # an index followed by ":" numbers a heading ("LLM Answer 1:", "Solution 2:"), not an answer
    names += [rf"[(\[#]?{i}(?!\d|\.\d|\s*:)" for i in _indices(problem, index_bases)]
    return re.compile(CUE + r"\$?(?:" + "|".join(names) + ")", re.MULTILINE)


def index_text_pattern(problem: Problem, index_bases: Iterable[int] = INDEX_BASES) -> re.Pattern | None:
    """A choice marker naming the gold, then the gold's text: "1. Jupiter", "(B) Jupiter"."""
    letter = gold_letter(problem)
    if letter is None:
        return None
    marks = "|".join([rf"(?i:{letter})"] + _indices(problem, index_bases))
    return re.compile(rf"(?<![\w.])[(\[]?\s*(?:{marks}){MARK_END}(?i:{re.escape(gold_text(problem))})(?!\w)")


def _listing(choices, marker) -> str:
    return r"[\s,;]*".join(rf"[(\[]?\s*{marker(i)}{MARK_END}{re.escape(c)}" for i, c in enumerate(choices))


def _covered(text: str, problem: Problem, model_spans: Iterable[str]) -> list[tuple[int, int]]:
    """Intervals of `text` that are legitimate places for the gold: the problem's own question,
    its full choice listing (every choice in order, marked A./(A)/0./1) alike), and verbatim
    echoes of the reasoner's own output. All are found in the original text, so an echo that
    overlaps the listing (a model that answered "1. Jupiter") cannot break the listing's match."""
    spans = [s for s in set(model_spans) if s] + [problem.question]
    out = []
    for span in spans:
        start = text.find(span)
        while start >= 0:
            out.append((start, start + len(span)))
            start = text.find(span, start + 1)
    if problem.choices:
        for marker in (lambda i: LETTERS[i], lambda i: str(i), lambda i: str(i + 1)):
            out += [m.span() for m in re.finditer(rf"(?i){_listing(problem.choices, marker)}", text)]
    return out


def _strip(text: str, intervals: list[tuple[int, int]]) -> str:
    """`text` with every covered character blanked (positions kept, so excerpts stay readable)."""
    chars = list(text)
    for a, b in intervals:
        chars[a:b] = " " * (b - a)
    return "".join(chars)


def _excerpt(text: str, start: int, end: int, pad: int = 40) -> str:
    return text[max(0, start - pad) : end + pad].replace("\n", " ")


def scan_text(
    text: str,
    problem: Problem,
    index_bases: Iterable[int] = INDEX_BASES,
    min_chars: int = MIN_CHARS,
    model_spans: Iterable[str] = (),
) -> list[tuple[str, str]]:
    """[(kind, excerpt)] of leaks in one piece of harness-written text.

    `model_spans` are verbatim pieces of the reasoner's own output echoed into this text (the
    rendered past attempts of a re-prompt); they, the question and its full choice listing are
    blanked before the search (see _covered).
    """
    text = _strip(text, _covered(text, problem, model_spans))
    hits = [
        ("answer_statement", _excerpt(text, m.start(), m.end()))
        for m in statement_pattern(problem, index_bases).finditer(text)
    ]
    pair = index_text_pattern(problem, index_bases)
    hits += [
        ("index_text", _excerpt(text, m.start(), m.end())) for m in (pair.finditer(text) if pair else ())
    ]
    gold = normalise(gold_text(problem))
    if len(gold) >= min_chars:
        flat = normalise(text)
        hits += [
            ("option_text", _excerpt(flat, m.start(), m.end()))
            for m in re.finditer(rf"(?<!\w){re.escape(gold)}(?!\w)", flat)
        ]
    return hits


def names_gold(answer: str, problem: Problem) -> bool:
    """Whether a bare answer field names the gold: "B", "(B)", "B) Paris", "Paris"."""
    n, letter = normalise(answer).strip(" .:"), gold_letter(problem)
    if n in (normalise(problem.gold), normalise(gold_text(problem))):
        return True
    return bool(letter and re.fullmatch(rf"\(?{letter.lower()}\)?[.):]?(\s.*)?", n))


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
    messages, and each past/current attempt as dataset.render_context / dm_input_text print it."""
    attempts = [c for c in record.get("context") or () if isinstance(c, Mapping) and "answer" in c]
    spans = [
        str(m.get("content", ""))
        for m in record.get("messages") or ()
        if isinstance(m, Mapping) and m.get("role") == "assistant"
    ]
    if "answer" in record:
        attempts.append({"answer": record["answer"], "rationale": record.get("rationale", "")})
    for i, a in enumerate(attempts, 1):
        spans.append(render_context([a], "exploration"))
        spans.append(f"LLM Answer {i}: {a['answer']}\nRationale {i}: {a.get('rationale', '')}")
        spans.append(f"Answer: {a['answer']}\nRationale: {a.get('rationale', '')}")
        spans.append(str(a.get("rationale", "")))
    return spans


def scan_record(
    record: Mapping,
    problem: Problem,
    file: str = "",
    line: int | None = None,
    index_bases: Iterable[int] = INDEX_BASES,
    min_chars: int = MIN_CHARS,
) -> list[Finding]:
    """Every leak in one stored prompt record ({"messages"} or {"prompt"}) or DM row."""
    row_id = str(record.get("row_id") or record.get("key") or record.get("id") or "")
    spans = _model_spans(record)
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
