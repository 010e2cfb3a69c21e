"""Run ART programs: generation pauses at each tool call, the tool runs, generation resumes.

    runner = ProgramRunner(llm, tools, mode="pause", max_steps=6, segment_tokens=96)
    traces = runner.run(prefix, heads)     # prefix: demonstrations; heads: "Description/Input" per item

Each program is its own task of retrace.engine.scheduler (`trace_task`): its next segment goes to
the engine as soon as its previous one came back and its tool ran, whatever the other
programs are doing (no round barrier); the requests are those of generating round by round.

Modes:
- "pause" (ART as described, §3.1 and Fig. 4): generation stops at "\\n#" (the start of a
  step's output). If the pending step names a tool, the tool runs and its output is written
  as "#i: …", followed by "Qi+1:", and generation resumes from there; if it names a skill,
  "#i:" is appended and the model writes the output itself. Ends at "Ans:", at the step
  limit, at max tokens, or at a parse error (each recorded).
- "regenerate" (the released code's behaviour): the model writes a whole program; the first
  tool step not yet run is executed, its output replaces the model's, everything after it is
  dropped and regenerated; repeated until no tool step is left or the step limit.
- "notools" (ART without tools): one generation; the model fills every "#i" itself.

Each trace keeps, per generation request, the prompt after the shared demonstrations, the
text generated, its cache key, token counts and latency; per tool call, the input, output,
latency, ok flag and error. The full prompt of a request is its cache entry (requests.sqlite).
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field

from retrace.art.program import Program, ProgramError, Step, parse, parse_partial
from retrace.tools._interface import ToolCall, ToolOutput, tool_name
from retrace.util.records import Completion, Request, Sampling

END_STOPS = ("\n----", "\nDescription:", "\nInput:")
PAUSE_STOPS = ("\n#",) + END_STOPS
MODES = ("pause", "regenerate", "notools")
_ANS_LINE = re.compile(r"(?m)^Ans:[^\n]*")
_MARKER = re.compile(r"(?m)^(?=Description:|Input:|Q\d+:|#\d+:|Ans:)")


@dataclass
class Trace:
    head: str
    sample_index: int = 0
    seed: int = 0  # the engine seed of every request of this program
    body: str = "Q1:"
    answer: str | None = None
    complete: bool = False
    error: str | None = None
    done: bool = False
    segments: list = field(default_factory=list)
    tool_calls: list = field(default_factory=list)
    tools_run: set = field(default_factory=set)

    @property
    def text(self) -> str:
        return self.head + "\n" + self.body

    def finish(self, error: str | None = None) -> None:
        self.done, self.error = True, error if self.error is None else self.error

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("tools_run")
        d["program"] = d.pop("body")
        return d


def sanitize(output: str) -> str:
    """Tool output is untrusted text: indent lines that would read as program markers."""
    return _MARKER.sub(" ", output.strip())


def output_block(index: int, output: str) -> str:
    out = sanitize(output)
    return f"\n#{index}:\n{out}" if "\n" in out else f"\n#{index}: {out}"


def cut_after_answer(body: str) -> tuple[str, bool]:
    m = _ANS_LINE.search(body)
    return (body[: m.end()], True) if m else (body, False)


def render_steps(steps: list[Step]) -> str:
    lines = []
    for s in steps:
        lines.append(f"Q{s.index}: [{s.tag}] {s.instruction}")
        if s.output is not None:
            lines.append(output_block(s.index, s.output).lstrip("\n"))
    return "\n".join(lines)


class ProgramRunner:
    def __init__(
        self,
        llm,
        tools: dict,
        mode: str = "pause",
        max_steps: int = 6,
        segment_tokens: int = 96,
        program_tokens: int = 320,
        temperature: float = 0.0,
        seed: int = 0,
        max_rounds: int | None = None,
    ):
        if mode not in MODES:
            raise ValueError(f"unknown ART mode {mode!r}; valid: {', '.join(MODES)}")
        self.llm, self.tools, self.mode = llm, tools, mode
        self.max_steps, self.segment_tokens, self.program_tokens = max_steps, segment_tokens, program_tokens
        self.temperature, self.seed = temperature, seed
        self.max_rounds = max_rounds or 2 * max_steps + 2

    def run(
        self,
        prefix: str,
        heads: list[str],
        sample_indices: list[int] | None = None,
        seeds: list[int] | None = None,
    ) -> list[Trace]:
        """One program per head; `seeds` gives each its engine seed (default: the runner's).
        Each program is its own scheduler task (`trace_task`), all run at once."""
        ks = sample_indices or [0] * len(heads)
        traces = [Trace(h, k, s) for h, k, s in zip(heads, ks, seeds or [self.seed] * len(heads))]
        return self.llm.run_tasks(self.trace_task(prefix, t) for t in traces)

    def trace_task(self, prefix: str, t: Trace):
        """One program from its head to its end, as a retrace.engine.scheduler task: generate a
        segment (or the whole program), run the tool it stopped at, resume; at most
        `max_rounds` generations. Returns the finished Trace."""
        for _ in range(self.max_rounds):
            self._take(t, (yield self._request(prefix, t)))
            # regenerate mode looks for tools in finished programs too (it then reopens them)
            if not t.done or self.mode == "regenerate":
                yield from self._run_tool(t)
            if t.done:
                break
        if not t.done:
            t.finish("round_limit")
        self._conclude(t)
        return t

    # -- one generation --------------------------------------------------------------------
    def _request(self, prefix: str, t: Trace) -> Request:
        """The next generation of `t`: a segment up to the next output (pause) or a program."""
        pause = self.mode == "pause"
        return Request(
            prompt=prefix + t.text,
            sample_index=t.sample_index,
            tag="art",
            sampling=Sampling(
                temperature=self.temperature,
                seed=t.seed,
                max_tokens=self.segment_tokens if pause else self.program_tokens,
                stop=PAUSE_STOPS if pause else END_STOPS,
            ),
        )

    def _take(self, t: Trace, c: Completion) -> None:
        """Record a generation and append it; finish the program or prepare its next step."""
        t.segments.append(
            {
                "prompt_tail": t.text,
                "text": c.text,
                "finish_reason": c.finish_reason,
                "key": c.key,
                "prompt_tokens": c.prompt_tokens,
                "generated_tokens": c.generated_tokens,
                "cache_hit": c.cache_hit,
                "latency_s": round(c.latency_s, 3),
            }
        )
        t.body, has_answer = cut_after_answer(t.body + c.text)
        if has_answer or self.mode == "notools":
            t.finish()
        elif c.finish_reason == "length":
            t.finish("max_tokens")
        elif self.mode == "pause":
            self._after_pause(t)

    def _after_pause(self, t: Trace) -> None:
        try:
            prog = parse_partial(t.text)
        except ProgramError as e:
            return t.finish(f"parse: {e}")
        step = prog.pending
        if step is None:
            return t.finish("stopped without Ans")
        if step.index > self.max_steps:
            return t.finish("step_limit")
        if tool_name(step.tag) not in self.tools:
            t.body += f"\n#{step.index}:"  # a skill: the model writes the output itself

    # -- tools ---------------------------------------------------------------------------
    def _run_tool(self, t: Trace):
        """Run the tool step `_tool_step` picks (if any) and write its output into the program
        (a step of the trace's task). A broken tool fails its call, not the job; an engine
        error on a code-generate request fails the job like any request's (the scheduler
        raises it, so it never reaches this task)."""
        found = self._tool_step(t)
        if found is None:
            return
        s, p = found
        name = tool_name(s.tag)
        call = ToolCall(s.tag, s.instruction, p.input, tuple(x for x in p.steps if x.index < s.index))
        start = time.perf_counter()
        try:
            out = yield from self._call(self.tools[name], call)
        except Exception as e:
            out = ToolOutput(f"Error: {type(e).__name__}", ok=False, error=f"{type(e).__name__}: {e}")
        self._record_tool(t, s, p, name, call, out, time.perf_counter() - start)

    def _call(self, tool, call: ToolCall):
        """One tool call inside the trace's task. A tool on the runner's LLM (code generate)
        yields its request, which then queues with the programs' segments.

        Any other tool runs right here, in the scheduler's thread, so no request is sent or
        collected while it runs. That is acceptable: the engine keeps working on what is
        already in flight, the tools are short next to a generation (code execute ~0.1 s in
        the WASM sandbox and capped by its wall_s; search and lookup are in-process), and one
        call at a time keeps tools free of thread-safety concerns and their outputs
        independent of timing. (The round-based runner blocked on every tool of a round.)"""
        if tool.llm is None or tool.llm is self.llm:
            return (yield from tool.task(call))
        return tool.run_batch([call])[0]  # a tool on another LLM makes its own generate call

    def _tool_step(self, t: Trace) -> tuple[Step, Program] | None:
        """The step whose tool should run now: the pending one (pause) or the first not yet run."""
        if self.mode == "pause":
            partial = parse_partial(t.text)
            return (partial.pending, partial) if partial.pending is not None else None
        if self.mode == "notools":
            return None
        prog = self._parsed(t)
        if prog is None:
            return None
        for s in prog.steps:
            if tool_name(s.tag) in self.tools and s.index not in t.tools_run:
                if s.index > self.max_steps:
                    t.finish("step_limit")
                    return None
                t.done, t.error = False, None
                return s, prog
        return None

    def _parsed(self, t: Trace) -> Program | None:
        for fn in (parse, parse_partial):
            try:
                return fn(t.text)
            except ProgramError:
                continue
        return None

    def _record_tool(
        self, t: Trace, s: Step, p: Program, name: str, call: ToolCall, out: ToolOutput, latency: float
    ) -> None:
        t.tool_calls.append(
            {
                "step": s.index,
                "tool": name,
                "input": call.instruction,
                "output": out.text,
                "ok": out.ok,
                "error": out.error,
                "latency_s": round(latency, 4),
                "meta": out.meta,
            }
        )
        t.tools_run.add(s.index)
        if self.mode == "regenerate":
            kept = [x for x in p.steps if x.index < s.index]
            t.body = render_steps(kept + [Step(s.index, s.tag, s.instruction, None)])
        t.body += output_block(s.index, out.text) + f"\nQ{s.index + 1}:"

    # -- the result ------------------------------------------------------------------------
    def _conclude(self, t: Trace) -> None:
        try:
            prog = parse(t.text)
        except ProgramError as e:
            t.complete, t.answer = False, None
            if t.error is None:
                t.error = f"incomplete: {e}"
            return
        t.complete, t.answer = True, prog.answer
        if self.mode == "regenerate" and t.error == "round_limit":
            t.complete, t.answer = False, None
