"""`code generate` and `code execute`: ART's code tools (App. A.3).

    gen = TOOLS.get("code_generate")({"max_tokens": 192}, llm=llm)   # the LLM writes Python
    run = TOOLS.get("code_execute")({"wall_s": 10})                  # the sandbox runs it
    TOOLS.get("code_execute")({"sandbox": "bwrap", "bwrap": "/usr/bin/bwrap"})  # native executor
    code = gen(ToolCall("code generate", "Write code that adds 46 and 27.", input="…")).text
    run(ToolCall("code execute", "Execute the code in #1.", steps=(Step(1, "code generate", "…", code),)))

`code generate` renders prompts/art_code_generate.j2 (the step's instruction, the program
input and the earlier results) and keeps the code of the reply's first ```python block (or
the whole reply when it has none); in ART's runner each call's request is a step of its
program's scheduler task (`task`), sent as soon as the program reaches it. The code must store
its result in `ans` and print it.
`code execute` runs the code named by "#k" in the instruction, else the latest `[code
generate]` output, in retrace.tools.code_exec; settings: `sandbox` (`wasm`, the default:
CPython on WASI in wasmtime, standard library only; `bwrap`: the venv's Python in bubblewrap),
`bwrap` (path of the bwrap binary, default the first on PATH), `cache_dir` (the compiled
WASM runtime, default results/cache/wasm), `wall_s`, `cpu_s`. It refuses to start when
isolation is unavailable. Its output is `ans`, else the last printed
line; a failure yields "Error: <last line of stderr>" with ok=False and the reason
(timeout, output limit, signal, exception) in `error`. Text longer than the setting
`output_chars` (default 1000) keeps its head and tail around a "[…N characters cut…]"
marker; `meta` (kept in the trace) records output_chars, output_cap and output_cut.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from retrace.tools import TOOLS
from retrace.tools._interface import Tool, ToolCall, ToolOutput, tool_name
from retrace.tools.code_exec import (
    DEFAULT_SANDBOX,
    Limits,
    SandboxUnavailable,
    executor,
    run_code,
    sandbox_problem,
)
from retrace.util.records import Completion, Message, Request, Sampling
from retrace.util.templates import render, template_path

TEMPLATE = "art_code_generate.j2"
OUTPUT_CHARS = 1000  # default cap on a `code execute` output written into the program
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|$)", re.S)
_REF = re.compile(r"#(\d+)")


def extract_code(reply: str) -> str:
    m = _FENCE.search(reply)
    return (m.group(1) if m else reply).strip("\n")


def head_and_tail(text: str, cap: int) -> tuple[str, int]:
    """(text cut to about `cap` characters: its first and last halves around a marker, chars cut)."""
    if len(text) <= cap:
        return text, 0
    cut = len(text) - cap
    head, tail = text[: (cap + 1) // 2], text[len(text) - cap // 2 :] if cap > 1 else ""
    return f"{head} […{cut} characters cut…] {tail}", cut


def context_of(steps) -> str:
    return "\n".join(f"#{s.index} ({s.tag}): {s.output}" for s in steps if s.output)


@TOOLS.register("code_generate")
class CodeGenerate(Tool):
    name = "code_generate"

    @classmethod
    def data_files(cls, settings: dict | None = None) -> list[Path]:
        return [template_path(TEMPLATE)]

    def request(self, call: ToolCall) -> Request:
        prompt = render(
            TEMPLATE, input=call.input, context=context_of(call.steps), instruction=call.instruction
        )
        s = self.settings
        return Request(
            messages=(Message("user", prompt),),
            tag="code_generate",
            sampling=Sampling(
                temperature=float(s.get("temperature", 0.0)),
                max_tokens=int(s.get("max_tokens", 192)),
                seed=int(s.get("seed", 0)),
            ),
        )

    def run_batch(self, calls: Sequence[ToolCall]) -> list[ToolOutput]:
        self._need_llm()
        return [self.output(c) for c in self.llm.generate([self.request(c) for c in calls])]

    def task(self, call: ToolCall):
        """The call as a scheduler task: its one request, then the code of the reply."""
        self._need_llm()
        return self.output((yield self.request(call)))

    def _need_llm(self) -> None:
        if self.llm is None:
            raise RuntimeError("code generate needs the LLM (construct it with llm=...)")

    @staticmethod
    def output(c: Completion) -> ToolOutput:
        """The code of a reply (its first python block), with the request's accounting."""
        code = extract_code(c.text)
        meta = {"generated_tokens": c.generated_tokens, "cache_hit": c.cache_hit, "key": c.key}
        return ToolOutput(
            code, ok=bool(code.strip()), meta=meta, error=None if code.strip() else "the model wrote no code"
        )

    def __call__(self, call: ToolCall) -> ToolOutput:
        return self.run_batch([call])[0]


def code_for(call: ToolCall) -> str | None:
    """The code a `code execute` step means: "#k" in its instruction, else the latest generated."""
    by_index = {s.index: s for s in call.steps}
    for ref in _REF.findall(call.instruction):
        step = by_index.get(int(ref))
        if step is not None and step.output:
            return extract_code(step.output)
    for step in reversed(call.steps):
        if tool_name(step.tag) == "code_generate" and step.output:
            return extract_code(step.output)
    return None


@TOOLS.register("code_execute")
class CodeExecute(Tool):
    name = "code_execute"
    executor = staticmethod(run_code)

    def __init__(self, settings: dict | None = None, llm=None):
        super().__init__(settings, llm)
        self.sandbox = str(self.settings.get("sandbox", DEFAULT_SANDBOX))
        executor(self.sandbox)  # an unknown name is refused here, naming the valid ones
        option = {"wasm": "cache_dir", "bwrap": "bwrap"}[self.sandbox]
        self.options = {option: self.settings[option]} if self.settings.get(option) else {}
        # Refuse at the start of a job, not per call: an ART run whose code steps all fail
        # for want of a sandbox would report wrong numbers instead of stopping.
        problem = sandbox_problem(self.sandbox, **self.options)
        if problem is not None:
            raise SandboxUnavailable(
                f"code execute cannot run generated code here (sandbox: {self.sandbox}): {problem}"
            )

    def limits(self) -> Limits:
        s = self.settings
        return Limits(wall_s=float(s.get("wall_s", 10.0)), cpu_s=int(s.get("cpu_s", 5)))

    def describe(self) -> dict:
        return {"sandbox": self.sandbox, **executor(self.sandbox).describe(**self.options)}

    def __call__(self, call: ToolCall) -> ToolOutput:
        code = code_for(call)
        if not code:
            return ToolOutput("Error: no code to execute", ok=False, error="no code found")
        r = self.executor(code, self.limits(), sandbox=self.sandbox, **self.options)
        meta = {
            "exit_code": r.exit_code,
            "killed_reason": r.killed_reason,
            "timed_out": r.timed_out,
            "truncated": r.truncated,
            "wall_s": round(r.wall_s, 3),
        }
        cap = int(self.settings.get("output_chars", OUTPUT_CHARS))
        if r.ok:
            lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
            text = r.ans if r.ans is not None else (lines[-1] if lines else "")
            return ToolOutput(self._capped(text.strip(), cap, meta), meta=meta)
        err = [ln for ln in r.stderr.splitlines() if ln.strip()]
        why = r.killed_reason or (err[-1] if err else f"exit code {r.exit_code}")
        return ToolOutput(
            self._capped(f"Error: {err[-1] if err else why}", cap, meta), ok=False, error=why, meta=meta
        )

    @staticmethod
    def _capped(text: str, cap: int, meta: dict) -> str:
        """Keep the head and the tail of a long output (a list's end matters as much as its
        start); the trace records the full length, the cap and how much was cut."""
        shown, cut = head_and_tail(text, cap)
        meta.update(output_chars=len(text), output_cap=cap, output_cut=cut)
        return shown
