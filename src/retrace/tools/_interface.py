"""What an ART tool receives and returns (shared by the tool plugins in this package).

    from retrace.registry import ...; from retrace.tools import TOOLS
    tool = TOOLS.get("search")(settings={"top_k": 1})        # one instance per job
    out = tool(ToolCall(tag="search", instruction="When was the telegram invented?"))
    out.text, out.ok, out.error, out.meta                   # meta: hits, collection, version …

A program step `Qi: [code execute] …` names the tool "code execute"; `tool_name(tag)` maps it
to the registry name "code_execute". Tags that name no tool are skills the LLM fills itself.
`run_batch` lets a tool that needs the LLM (code generate) send all calls of one generation
round in one batch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence


@dataclass(frozen=True)
class ToolCall:
    tag: str
    instruction: str
    input: str = ""                 # the program's Input (for tools that need context)
    steps: tuple = ()               # earlier steps (retrace.art.program.Step), outputs filled


@dataclass
class ToolOutput:
    text: str
    ok: bool = True
    error: str | None = None        # why the tool failed (the text then explains it briefly)
    meta: dict = field(default_factory=dict)


def tool_name(tag: str) -> str:
    return "_".join(tag.lower().split())


class Tool:
    """Base of the ART tools; subclasses implement `__call__` (and maybe `run_batch`)."""
    name = ""

    def __init__(self, settings: dict | None = None, llm=None):
        self.settings, self.llm = dict(settings or {}), llm

    def __call__(self, call: ToolCall) -> ToolOutput:
        raise NotImplementedError

    def run_batch(self, calls: Sequence[ToolCall]) -> list[ToolOutput]:
        return [self(c) for c in calls]

    @classmethod
    def data_files(cls, settings: dict | None = None) -> list[Path]:
        """Files besides its source that decide the tool's outputs (hashed into rerun keys)."""
        return []

    def describe(self) -> dict:
        """What provenance should record about this tool instance (collection, word list …)."""
        return {}
