"""`lookup`: English words from a real word list (ART's dictionary lookup, App. A.3 / Table 20).

    tool = TOOLS.get("lookup")({"words": "/usr/share/dict/words"})
    tool(ToolCall("lookup", 'Which English words use exactly the letters "tac"?')).text  # "act cat"

The letters are the first quoted string of the instruction, else its last word. The answer
lists the words of the list that are anagrams of those letters (case-insensitive, letters
only), alphabetically; "no English word" when none is. The default list is Debian's
`wamerican` (/usr/share/dict/words; `apt-get install wamerican`).
"""
from __future__ import annotations

import functools
import re
from collections import defaultdict
from pathlib import Path

from retrace.hashing import sha256_file
from retrace.tools import TOOLS
from retrace.tools._interface import Tool, ToolCall, ToolOutput

DEFAULT_WORDS = Path("/usr/share/dict/words")
_QUOTED = re.compile(r"[\"'“‘]([A-Za-z]+)[\"'”’]")
_WORD = re.compile(r"[A-Za-z]+")


class WordListMissing(FileNotFoundError):
    """The dictionary file is absent; the message says how to install it."""


@functools.lru_cache(maxsize=2)
def anagram_index(path: str, digest: str) -> dict[str, list[str]]:
    index: dict[str, set[str]] = defaultdict(set)
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        word = line.strip()
        if word.isalpha() and word.isascii():
            index["".join(sorted(word.lower()))].add(word.lower())
    return {k: sorted(v) for k, v in index.items()}


def letters_of(instruction: str) -> str | None:
    m = _QUOTED.search(instruction)
    if m:
        return m.group(1).lower()
    words = _WORD.findall(instruction)
    return words[-1].lower() if words else None


@TOOLS.register("lookup")
class Lookup(Tool):
    name = "lookup"

    def __init__(self, settings: dict | None = None, llm=None):
        super().__init__(settings, llm)
        self.path = Path(self.settings.get("words") or DEFAULT_WORDS)
        if not self.path.is_file():
            raise WordListMissing(f"lookup needs a word list at {self.path}: install Debian's wamerican "
                                  "(apt-get install wamerican) or set tools.lookup.words")
        self.digest = sha256_file(self.path)

    @classmethod
    def data_files(cls, settings: dict | None = None) -> list[Path]:
        return []  # a system file: recorded (path + sha256) in provenance, not in rerun keys

    def describe(self) -> dict:
        return {"collection": str(self.path), "version": self.digest[:12]}

    def __call__(self, call: ToolCall) -> ToolOutput:
        letters = letters_of(call.instruction)
        meta = self.describe()
        if not letters:
            return ToolOutput("no letters given", ok=False, error="no letters in the instruction", meta=meta)
        words = anagram_index(str(self.path), self.digest).get("".join(sorted(letters)), [])
        meta["letters"] = letters
        if not words:
            return ToolOutput("no English word", ok=True, meta=meta)
        return ToolOutput(" ".join(words), meta=meta)
