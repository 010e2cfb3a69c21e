"""How the gold-leak check reads one piece of text (retrace.drr.leak scans records and files).

    scan_text(text, problem, model_spans=[...])  # [(kind, excerpt)], kind as below

The text is compared after collapsing runs of spaces (newlines kept) and dropping markdown "*".
First the places where the gold belongs are blanked: the question, its own full choice listing
(every choice in order, marked A./(A)/0./1.), the fixed text of DRR's prompt templates
(prompts/drr/*.j2: "think outside the box" is not a leak of the gold "box") and the
`model_spans` the caller names (the reasoner's own output echoed back, a template's fixed text).
In what is left, the gold counts as stated when it appears as:
1. `answer_statement`: a cue ("Answer:", "Hint:", "Key =", "Correct:", "gold=", "Ground truth
   label:", "the expected option is", ... see CUE) followed by the gold named as
   - its letter ("Key: B", "answer is (B)"; upper case or bracketed; "A" and "I", English
     words, only when they end the clause: "the answer is A." but not "the answer: A student");
   - its index, 0-based (the DRR prompts number choices from 0, Appendix B) or 1-based
     ("Hint: 1" and "Hint: 2" both name choice B), also as "option 2", "choice #2";
   - its ordinal ("the expected option is the second one"; "the last one" for the last choice);
   - its option text, of any length, ending the clause ("Ground truth label: no").
   Index, ordinal and text need a separator after the cue (":", "=", "-", "is", "would be"),
   so "Answer yes or no." (an instruction, gold "yes") and "LLM Answer 2:" (a heading) are not
   statements; so is a name followed by a verdict: "option 2 is correct", "B is the answer".
2. `index_text`: a choice marker of the gold followed by its text ("1. Jupiter", "(B) no").
3. `option_text`: the gold's text as whole words anywhere, when it is at least MIN_CHARS long,
   except inside a template label left unblanked ("Question:" for the gold "question");
   a shorter gold ("no", "box", "list") counts only as part of (1) or (2).
Overlapping matches are reported once, under the first kind in that order.

What it cannot catch:
- Paraphrases beyond the cue grammar ("the capital of France", "not the first one"), other
  languages, golds encoded another way (arithmetic, spelling out "two"), cues outside CUE.
- A bare letter, index or short word with no cue: instructions are full of them ("option B",
  "turn 1", "(e.g., 0, 1, 2, etc)", "yes or no").
- A listing that names only some choices, or reorders them, is not the question's own: if it
  holds the gold it is reported (a false positive, safe side).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from retrace.tasks.base import LETTERS
from retrace.util.records import Problem

MIN_CHARS = 5  # a gold shorter than this ("no", "box", "list") is searched only behind a cue
INDEX_BASES = (0, 1)  # DRR numbers choices from 0 (Appendix B); a leak may count from 1
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
# A statement's lead-in: the answer forms tasks/_choice.py parses as a committed answer, and
# the cue words answer keys and injected hints use; then an optional separator (":", "=", "-",
# "is", "would be"), which index, ordinal and text statements need.
CUE = re.compile(
    r"(?i)\b(?:(?:the\s+)?(?:correct|right|best|final|true|gold(?:en)?|expected|target|reference)"
    r"\s+(?:answer|option|choice|label|index|response)|answer(?:\s+key)?|ground[\s_-]*truth(?:\s+label)?|"
    r"gold(?:en)?(?:\s+(?:label|answer))?|label|solution|hint|key|correct|right|truth|target)\b"
    r"(?P<sep>\s*(?:[:=\-–]|\s(?:is|was|would\s+be|should\s+be|will\s+be)\b(?:\s*[:=\-–])?))?\s*"
)
# "choose option", "the choice #" between a cue and the name: "Hint: pick option 2"
FILLER = re.compile(
    r"(?i)(?:(?:to\s+)?(?:choose|pick|select|go\s+with)\s+)?(?:the\s+)?"
    r"(?:(?:option|choice|answer|number|index|letter|no\.)\s*#?\s*)?"
)
ORDINAL = r"(?:the\s+)?(?P<ord>[a-z]+|\d{1,2}(?:st|nd|rd|th))(?:\s+(?:one|option|choice|answer))?\b"
# a name of a choice: "(b)", "B", "#2", "[1]", "the second one"; an index followed by ":" numbers
# a heading ("LLM Answer 1:", "Solution 2:"), not an answer
NAME = re.compile(
    r"[(\[]\s*(?P<bl>[A-Za-z])\s*[)\]]|(?P<l>[A-Z])(?![A-Za-z0-9])"
    r"|[(\[#]?(?P<idx>\d{1,2})(?!\d|\.\d|\s*:)[)\]]?|(?i:" + ORDINAL + ")"
)
# a name followed by a verdict: "option 2 is correct", "B is the answer", "the second one is right"
VERDICT = re.compile(r"(?i)\s+(?:is|was)\s+(?:the\s+)?(?:correct|right|true|gold|expected|answer)\b")
NAME_BEFORE = re.compile(
    r"(?:(?<![\w.])(?i:option|choice|answer|number)\s*#?\s*(?:(?P<idx>\d{1,2})|(?P<bl>[A-Za-z]))"
    r"|(?<![\w.])(?P<l>[A-Z])|(?<!\w)(?i:" + ORDINAL + r"))\Z"
)
CLAUSE_END = re.compile(r"\s*(?:[.,;:!?)\]\"'”]|$)", re.M)
QUOTE = re.compile(r"[\"'“(\[]?")
MARK_END = r"\s*[.):\]\-]\s*"  # after a choice marker: "1." "(B)" "2:" "C -"
MARKER = re.compile(r"(?<![\w.])[(\[]?\s*(?P<m>[A-Za-z]|\d{1,2})" + MARK_END)
MARK_BEFORE = re.compile(r"(?<![\w.])[(\[]?\s*(?:[A-Za-z]|\d{1,2})" + MARK_END + r"\Z")
GAP = re.compile(r"[\s,;]*[(\[]?\s*(?:[A-Za-z]|\d{1,2})" + MARK_END)
HOLE = "\x00"  # one blanked (covered) stretch of text
BREAKS, SPACES = re.compile(r"[^\S\n]*\n\s*"), re.compile(r"[^\S\n]+")


def squash(text: str) -> str:
    """The comparison form: markdown "*" dropped, runs of spaces collapsed to one, spaces
    around a line break dropped, ends stripped (case kept: a bare "B" is not a "b")."""
    return SPACES.sub(" ", BREAKS.sub("\n", text.replace("*", ""))).strip()


@lru_cache(maxsize=1 << 16)
def _squashed(text: str) -> str:
    """squash, remembered: questions, choices and echoes recur across a question's prompts."""
    return squash(text)


def normalise(text: str) -> str:
    """Lower case, markdown emphasis removed, whitespace collapsed."""
    return " ".join(text.replace("*", "").lower().split())


def gold_letter(problem: Problem) -> str | None:
    """The gold choice letter of a multiple-choice problem, else None."""
    g = problem.gold.strip().upper()
    return g if problem.choices and len(g) == 1 and g in LETTERS[: len(problem.choices)] else None


def gold_text(problem: Problem) -> str:
    """The gold option's text (multiple choice) or the gold answer itself (open-ended)."""
    letter = gold_letter(problem)
    return problem.choices[LETTERS.index(letter)] if letter and problem.choices else problem.gold


@lru_cache(maxsize=1)
def _template_pieces() -> tuple[str, ...]:
    """The fixed text of every DRR prompt template (prompts/drr/*.j2), squashed: each
    template rendered with placeholder variables and cut at them."""
    from retrace.util.templates import PROMPTS_DIR, render

    hole = "\x00"
    out: set[str] = set()
    for path in sorted((PROMPTS_DIR / "drr").glob("*.j2")):
        text = render(
            f"drr/{path.name}",
            question=hole,
            choices=[hole],
            context=[{"answer": hole, "rationale": hole}],
        )
        out.update(piece for piece in (squash(p).strip() for p in text.split(hole)) if piece)
    return tuple(sorted(out, key=len, reverse=True))


@lru_cache(maxsize=1)
def template_texts() -> tuple[str, ...]:
    """The template pieces that are blanked: at least three words long and not ending in a
    cue's colon ("Answer:"), so that blanking one can never hide a statement that follows it."""
    return tuple(p for p in _template_pieces() if len(p.split()) >= 3 and not p.endswith(":"))


@lru_cache(maxsize=1)
def template_labels() -> tuple[str, ...]:
    """The other pieces, kept in the text: labels such as "Question:" and "Choices:". A gold
    that is one of their words ("question", a CommonsenseQA gold, 2026-12-05) is not stated by
    them, so an `option_text` match inside a label is dropped; cues still read them."""
    blanked = set(template_texts())
    return tuple(p for p in _template_pieces() if p not in blanked)


def _occurrences(text: str, spans: Iterable[str]) -> list[tuple[int, int]]:
    """Intervals of every occurrence of each non-empty span in `text`."""
    out = []
    for span in spans:
        start = text.find(span) if span else -1
        while start >= 0:
            out.append((start, start + len(span)))
            start = text.find(span, start + 1)
    return out


@dataclass(frozen=True)
class Gold:
    """The ways one question's gold can be named: letter, indices, ordinals, text."""

    letter: str | None
    indices: frozenset[int]
    ordinals: frozenset[str]
    text: str  # squashed, lower case
    bare: bool  # long enough to be searched without a cue


@lru_cache(maxsize=8192)
def _gold(gold: str, choices: tuple[str, ...], index_bases: tuple[int, ...], min_chars: int) -> Gold:
    problem = Problem(id="", question="", gold=gold, choices=choices or None)
    letter, text = gold_letter(problem), squash(gold_text(problem)).lower()
    if letter is None:
        return Gold(None, frozenset(), frozenset(), text, len(text) >= min_chars)
    i = LETTERS.index(letter)
    ordinals = {f"{i + 1}{'st' if i == 0 else 'nd' if i == 1 else 'rd' if i == 2 else 'th'}"}
    ordinals |= {ORDINALS[i]} if i < len(ORDINALS) else set()
    ordinals |= {"last"} if 0 < i == len(choices) - 1 else set()
    return Gold(
        letter, frozenset(i + b for b in index_bases), frozenset(ordinals), text, len(text) >= min_chars
    )


def _listings(text: str, choices: Sequence[str]) -> Iterable[tuple[int, int]]:
    """Spans of the question's own choice listing: every choice in order, each behind a
    marker (A./(A)/0./1) ...), separated by spaces, commas or line breaks."""
    texts = [_squashed(c) for c in choices]
    if not texts or not all(texts):
        return
    start = 0
    while (at := text.find(texts[0], start)) >= 0:
        start = at + 1
        head = MARK_BEFORE.search(text, max(0, at - 12), at)
        if not head:
            continue
        pos = at + len(texts[0])
        for choice in texts[1:]:
            gap = GAP.match(text, pos)
            if not gap or not text.startswith(choice, gap.end()):
                break
            pos = gap.end() + len(choice)
        else:
            yield head.start(), pos


def _names_gold(m: re.Match, g: Gold, sep: bool, end: int, text: str) -> bool:
    """Whether a NAME / NAME_BEFORE match names the gold (index and ordinal need `sep`)."""
    if m.group("bl"):
        return m.group("bl").upper() == g.letter
    if m.group("l"):  # "A"/"I" are English words: as a bare letter they must end the clause
        return (
            g.letter is not None
            and m.group("l") == g.letter
            and (g.letter not in "AI" or bool(CLAUSE_END.match(text, end)))
        )
    if m.group("idx"):
        return sep and int(m.group("idx")) in g.indices
    return sep and (m.group("ord") or "").lower() in g.ordinals


def _past(pattern: re.Pattern[str], text: str, at: int) -> int:
    """Where `pattern` (all optional parts: it always matches) stops matching from `at`."""
    m = pattern.match(text, at)
    return m.end() if m else at


def _text_at(text: str, at: int, g: Gold) -> int | None:
    """End of the gold's text when it starts at `at` (after an optional quote) as whole words."""
    at = _past(QUOTE, text, at)
    end = at + len(g.text)
    if g.text and text[at:end].lower() == g.text and not text[end : end + 1].isalnum():
        return end
    return None


def _statements(text: str, g: Gold) -> Iterable[tuple[int, int]]:
    """Spans of a cue followed by the gold, and of the gold followed by a verdict."""
    for cue in CUE.finditer(text):
        sep, at = bool(cue.group("sep")), cue.end()
        end = _text_at(text, at, g) if sep else None
        if end is not None and CLAUSE_END.match(text, end):
            yield cue.start(), end
            continue
        if g.letter is None:
            continue
        name = NAME.match(text, _past(FILLER, text, at))
        if name and _names_gold(name, g, sep, name.end(), text):
            yield cue.start(), name.end()
    for v in VERDICT.finditer(text):
        before = text[max(0, v.start() - 60) : v.start()]
        m = NAME_BEFORE.search(before) if g.letter else None
        if m and _names_gold(m, g, True, v.start(), text):
            yield v.start() - len(before) + m.start(), v.end()
        elif g.text and before.lower().endswith(g.text):
            start = v.start() - len(g.text)
            if start == 0 or not text[start - 1].isalnum():
                yield start, v.end()


def _index_texts(text: str, g: Gold) -> Iterable[tuple[int, int]]:
    """Spans of a marker of the gold followed by the gold's text: "1. Jupiter", "(B) no"."""
    if g.letter is None:
        return
    marks = {g.letter} | {str(i) for i in g.indices}
    for m in MARKER.finditer(text):
        end = _text_at(text, m.end(), g)
        if m.group("m").upper() in marks and end is not None:
            yield m.start(), end


def _option_texts(text: str, g: Gold) -> Iterable[tuple[int, int]]:
    """Spans of the gold's text as whole words (long golds only)."""
    if not g.bare:
        return
    low, start = text.lower(), 0
    while (start := low.find(g.text, start)) >= 0:
        end = start + len(g.text)
        if (start == 0 or not low[start - 1].isalnum()) and not low[end : end + 1].isalnum():
            yield start, end
        start += 1


def _covered(text: str, problem: Problem, allowed: Iterable[str]) -> list[tuple[int, int]]:
    """Intervals of the squashed `text` where the gold legitimately is: the question, its own
    full choice listing, the fixed template text and `allowed` spans (model echoes, caller's
    template text). All are found in the unblanked text, so an echo that overlaps the listing
    (a model that answered "1. Jupiter") cannot break the listing's match."""
    spans = {*(_squashed(s) for s in (*allowed, problem.question)), *template_texts()}
    return _occurrences(text, spans) + list(_listings(text, problem.choices or ()))


def _blank(text: str, intervals: list[tuple[int, int]]) -> str:
    """`text` with each stretch of covered characters replaced by one HOLE (which no pattern
    reads across: a cue before a blanked question does not state what follows it)."""
    out: list[str] = []
    pos = 0
    for a, b in sorted(intervals):
        if b <= pos:
            continue
        out.append(text[pos:a] + HOLE if a > pos else ("" if out and out[-1].endswith(HOLE) else HOLE))
        pos = max(pos, b)
    return "".join(out) + text[pos:]


def _excerpt(text: str, start: int, end: int, pad: int = 40) -> str:
    return " ".join(text[max(0, start - pad) : end + pad].replace(HOLE, " … ").split())


def scan_text(
    text: str,
    problem: Problem,
    index_bases: Iterable[int] = INDEX_BASES,
    min_chars: int = MIN_CHARS,
    model_spans: Iterable[str] = (),
) -> list[tuple[str, str]]:
    """[(kind, excerpt)] of leaks in one piece of harness-written text.

    `model_spans` are verbatim pieces of text allowed to hold the gold (the reasoner's own
    output echoed into this text, a caller's fixed template text); they, the question, its
    full choice listing and DRR's template text are blanked before the search.
    """
    flat = squash(text)
    flat = _blank(flat, _covered(flat, problem, model_spans))
    if not flat.replace(HOLE, "").strip():
        return []
    g = _gold(problem.gold, tuple(problem.choices or ()), tuple(index_bases), min_chars)
    taken: list[tuple[int, int]] = []
    hits = []
    labels = _occurrences(flat, template_labels())
    options = [(a, b) for a, b in _option_texts(flat, g) if not any(x <= a and b <= y for x, y in labels)]
    for kind, spans in (
        ("answer_statement", _statements(flat, g)),
        ("index_text", _index_texts(flat, g)),
        ("option_text", options),
    ):
        for a, b in spans:
            if not any(a < y and x < b for x, y in taken):
                taken.append((a, b))
                hits.append((a, kind, _excerpt(flat, a, b)))
    return [(kind, excerpt) for _, kind, excerpt in sorted(hits)]


def names_gold(answer: str, problem: Problem) -> bool:
    """Whether an answer field names the gold as DRR scores it (drr.prompts.answer_letter: a
    0-based index first, then a choice's text or letter); open-ended: the gold itself."""
    if problem.choices:
        from retrace.drr.prompts import answer_letter

        return answer_letter(answer, problem.choices) == gold_letter(problem)
    return normalise(answer).strip(" .:") == normalise(problem.gold)
