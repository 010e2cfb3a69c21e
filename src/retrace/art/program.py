"""ART programs: the grammar (program.lark, parsed with lark) and the program model.

    from retrace.art.program import parse, parse_partial, ProgramError
    prog = parse(text)            # a finished program: ends with "Qk: [EOQ]" and "Ans: ..."
    prog.steps[0].tag             # "search"; prog.answer -> "yes"
    part = parse_partial(text)    # a prefix generation may still extend (no [EOQ] needed)
    part.pending                  # the last query if it has no "#i:" output yet

Errors name the line: `ProgramError("line 4: ...")`. Step numbers must run 1, 2, 3 …
with each "#i" answering "Qi" (the paper's grammar numbers steps; a mismatch means the
model lost track, which we report rather than silently renumber).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

GRAMMAR = Path(__file__).with_name("program.lark")
DELIMITER = "----"  # between demonstrations in a prompt (ART's prompt format)
_NUM = re.compile(r"^(?:Q|#)(\d+):")
_TAG = re.compile(r"^Q\d+:[ \t]*\[([^\]\n]+)\][ \t]*(.*)$", re.S)


class ProgramError(ValueError):
    """A text that is not an ART program (or prefix); the message starts with 'line N:'."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line


@dataclass(frozen=True)
class Step:
    index: int
    tag: str  # a tool name ("search", "code execute") or a skill ("subquestion")
    instruction: str
    output: str | None  # None while the step waits for its "#i:" output


@dataclass(frozen=True)
class Program:
    input: str
    steps: tuple[Step, ...]
    description: str | None = None
    answer: str | None = None  # set only for a complete program
    complete: bool = False

    @property
    def pending(self) -> Step | None:
        """The last step if it still waits for its output."""
        return self.steps[-1] if self.steps and self.steps[-1].output is None else None

    def tags(self) -> list[str]:
        return [s.tag for s in self.steps]


@dataclass
class _Block:
    kind: str
    first: str
    rest: list[str] = field(default_factory=list)
    line: int = 0

    def text(self, marker: str) -> str:
        head = self.first[len(marker) :] if self.first.startswith(marker) else self.first
        return "\n".join([head.strip()] + [r.rstrip("\n") for r in self.rest]).strip()


@functools.lru_cache(maxsize=1)
def _parser():
    from lark import Lark  # deferred: registry discovery should not pay for it

    return Lark(
        GRAMMAR.read_text(),
        start=["program", "partial"],
        parser="lalr",
        lexer="basic",
        propagate_positions=True,
    )


def _normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").strip("\n")
    return text + "\n"


def _blocks(tree) -> list[_Block]:
    from lark import Token

    blocks = []
    for node in tree.children:
        toks = [t for t in node.scan_values(lambda v: isinstance(v, Token))]
        if node.data == "step":
            blocks += _blocks(node)
            continue
        blocks.append(_Block(node.data, str(toks[0]), [str(t) for t in toks[1:]], toks[0].line))
    return blocks


_NAMES = {
    "DESC_LINE": "'Description:'",
    "INPUT_LINE": "'Input:'",
    "QUERY_LINE": "'Qi: [tag] …'",
    "EOQ_LINE": "'Qk: [EOQ]'",
    "OUTPUT_LINE": "'#i: …'",
    "ANS_LINE": "'Ans: …'",
    "TEXT_LINE": "a text line",
    "$END": "the end",
}


def _names(expected) -> str:
    return ", ".join(sorted(_NAMES.get(e, e) for e in expected))


def _lark_error(exc) -> ProgramError:
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

    if isinstance(exc, UnexpectedCharacters):
        return ProgramError(
            "a step must read 'Qi: [tool or skill] instruction' (or '#i:', 'Ans:', 'Input:')", exc.line
        )
    if isinstance(exc, UnexpectedToken):
        if exc.token.type == "$END":
            return ProgramError(
                f"program ends early: expected {_names(exc.expected)}", exc.token.line or None
            )
        return ProgramError(
            f"unexpected {str(exc.token).strip()!r}; expected {_names(exc.expected)}", exc.token.line
        )
    if isinstance(exc, UnexpectedEOF):
        return ProgramError(f"program ends early: expected {_names(exc.expected)}")
    return ProgramError(str(exc))


def _build(blocks: list[_Block], complete: bool) -> Program:
    desc = inp = answer = None
    steps: list[Step] = []
    query: _Block | None = None
    for b in blocks:
        if b.kind == "description":
            desc = b.text("Description:")
        elif b.kind == "input":
            inp = b.text("Input:")
        elif b.kind in ("query", "eoq"):
            n = _number(b.first)
            if n != len(steps) + 1:
                raise ProgramError(f"step Q{n} follows Q{len(steps)}; steps are numbered 1, 2, …", b.line)
            query = b
        elif b.kind == "output":
            n = _number(b.first)
            if query is None or n != len(steps) + 1:
                raise ProgramError(f"#{n} does not answer the step before it (Q{len(steps) + 1})", b.line)
            steps.append(_step(query, b))
            query = None
        elif b.kind == "answer":
            answer = b.text("Ans:")
    if query is not None and query.kind == "query":
        steps.append(_step(query, None))
    return Program(input=inp or "", steps=tuple(steps), description=desc, answer=answer, complete=complete)


def _matched(pattern: re.Pattern[str], line: str) -> re.Match[str]:
    """`pattern`'s match at the start of `line`, a block's head the grammar already matched."""
    m = pattern.match(line)
    if m is None:
        raise AssertionError(f"{line!r} does not start with {pattern.pattern!r}")
    return m


def _number(line: str) -> int:
    """The step number of a `Q<n>:` or `#<n>:` line."""
    return int(_matched(_NUM, line).group(1))


def _step(query: _Block, output: _Block | None) -> Step:
    head = query.first.split(":", 1)[1]
    body = "\n".join([head.strip()] + [r.rstrip("\n") for r in query.rest]).strip()
    tag, instruction = _matched(_TAG, f"Q0: {body}").groups()
    out = None
    if output is not None:
        out = output.text(output.first.split(":", 1)[0] + ":")
    return Step(_number(query.first), tag.strip().lower(), instruction.strip(), out)


def _parse(text: str, start: str) -> Program:
    from lark.exceptions import LarkError

    try:
        tree = _parser().parse(_normalise(text), start=start)
    except LarkError as exc:
        raise _lark_error(exc) from None
    return _build(_blocks(tree), complete=start == "program")


def parse(text: str) -> Program:
    """A complete program; ProgramError (with its line) otherwise, also when [EOQ]/Ans: lack."""
    return _parse(text, "program")


def parse_partial(text: str) -> Program:
    """A program prefix (input and steps so far, maybe a pending query); complete=False."""
    return _parse(text, "partial")
