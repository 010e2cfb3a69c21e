"""What an ART tool receives and returns (shared by the tool plugins in this package).

    from retrace.util.registry import ...; from retrace.tools import TOOLS
    tool = TOOLS.get("search")(settings={"top_k": 1})        # one instance per job
    out = tool(ToolCall(tag="search", instruction="When was the telegram invented?"))
    out.text, out.ok, out.error, out.meta                   # meta: hits, collection, version …

A program step `Qi: [code execute] …` names the tool "code execute"; `tool_name(tag)` maps it
to the registry name "code_execute". Tags that name no tool are skills the LLM fills itself.
`task(call)` is the call as a retrace.engine.scheduler task (ART's runner runs each program as
one): a tool that needs the LLM (code generate) yields its request there, so it queues with
the programs' own requests; `run_batch` sends several calls at once (one generate call).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ToolCall:
    tag: str
    instruction: str
    input: str = ""  # the program's Input (for tools that need context)
    steps: tuple = ()  # earlier steps (retrace.art.program.Step), outputs filled


@dataclass
class ToolOutput:
    text: str
    ok: bool = True
    error: str | None = None  # why the tool failed (the text then explains it briefly)
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

    def task(self, call: ToolCall):
        """The call as a scheduler task: yields the tool's LLM requests (none here), returns
        its ToolOutput. This default runs the call at once."""
        return self.run_batch([call])[0]
        yield  # unreachable: it makes this function a generator, as a task must be

    @classmethod
    def data_files(cls, settings: dict | None = None) -> list[Path]:
        """Files besides its source that decide the tool's outputs (hashed into rerun keys)."""
        return []

    def describe(self) -> dict:
        """What provenance should record about this tool instance (collection, word list …)."""
        return {}
