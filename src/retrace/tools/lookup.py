"""`lookup`: English words from a real word list (ART's dictionary lookup, App. A.3 / Table 20).

    tool = TOOLS.get("lookup")()                                     # the pinned PyPI word list
    tool(ToolCall("lookup", 'Which English words use exactly the letters "tac"?')).text  # "act cat"
    TOOLS.get("lookup")({"words": "/usr/share/dict/words"})          # or any one-word-a-line file

The letters are the first quoted string of the instruction, else its last word. The answer
lists the words of the list that are anagrams of those letters (case-insensitive, letters
only), most frequent first where the list has counts, else alphabetically; "no English
word" when none is.

Word lists (`tools.lookup.words`):
- `pyspellchecker:en` (default): `spellchecker/resources/en.json.gz` shipped as package data
  by `pyspellchecker==0.9.1` (MIT; envs/cpu.txt), a {word: count} map of ~160k English words
  with corpus frequencies. Installed from PyPI, so no apt package is needed. Its sha256 is
  pinned below and checked before use (the same supply-chain policy as the GGUF models): a
  different file is refused, not silently used.
- a path: a plain file of one word a line, e.g. Debian's wamerican (/usr/share/dict/words).
The file in use is hashed into the ART jobs' rerun keys and is a Snakemake input of them
(`data_files`), so replacing or editing it reruns exactly the jobs that construct the tool.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import json
import re
from collections import defaultdict
from pathlib import Path

from retrace.tools import TOOLS
from retrace.tools._interface import Tool, ToolCall, ToolOutput
from retrace.util.hashing import sha256_file

DEFAULT_WORDS = "pyspellchecker:en"
# name -> (package, file inside it, pinned sha256, the pin that installs it)
PACKAGED = {
    "pyspellchecker:en": (
        "spellchecker",
        "resources/en.json.gz",
        "2474a48af86fd81dccea9edd0bba6cd36dd2ecedc0ae217cefcb233bba28613c",
        "pyspellchecker==0.9.1",
    )
}
_QUOTED = re.compile(r"[\"'“‘]([A-Za-z]+)[\"'”’]")
_WORD = re.compile(r"[A-Za-z]+")


class WordListMissing(FileNotFoundError):
    """The word list is absent (or not the pinned file); the message says how to get it."""


def word_list_path(words: str | None) -> Path:
    """The file behind a `words` setting: a packaged list by name, else a path."""
    words = words or DEFAULT_WORDS
    if words not in PACKAGED:
        return Path(words)
    package, rel, _, pin = PACKAGED[words]
    spec = importlib.util.find_spec(package)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise WordListMissing(f"lookup's word list {words!r} needs the PyPI package: pip install {pin}")
    return Path(list(spec.submodule_search_locations)[0]) / rel


def _counts(path: str) -> dict[str, int]:
    if path.endswith(".json.gz"):
        return {str(w): int(c) for w, c in json.loads(gzip.decompress(Path(path).read_bytes())).items()}
    return {line.strip(): 0 for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines()}


@functools.lru_cache(maxsize=2)
def anagram_index(path: str, digest: str) -> dict[str, list[str]]:
    """sorted letters -> words (lower case), most frequent first, then alphabetical."""
    best: dict[str, dict[str, int]] = defaultdict(dict)
    for word, count in _counts(path).items():
        if word.isalpha() and word.isascii():
            w = word.lower()
            key = "".join(sorted(w))
            best[key][w] = max(count, best[key].get(w, 0))
    return {k: sorted(v, key=lambda w: (-v[w], w)) for k, v in best.items()}


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
        self.words = self.settings.get("words") or DEFAULT_WORDS
        self.path = word_list_path(self.words)
        if not self.path.is_file():
            raise WordListMissing(
                f"lookup needs a word list at {self.path} (tools.lookup.words = "
                f"{self.words!r}); the default {DEFAULT_WORDS!r} comes from PyPI"
            )
        self.digest = sha256_file(self.path)
        pinned = PACKAGED.get(self.words)
        if pinned and self.digest != pinned[2]:
            raise WordListMissing(
                f"{self.path}: sha256 {self.digest} is not the pinned {pinned[2]} "
                f"of {pinned[3]}; reinstall it (pip install --force-reinstall {pinned[3]})"
            )

    @classmethod
    def data_files(cls, settings: dict | None = None) -> list[Path]:
        return [word_list_path((settings or {}).get("words"))]

    def describe(self) -> dict:
        return {"collection": self.words, "path": str(self.path), "version": self.digest[:12]}

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
