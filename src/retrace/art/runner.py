"""Run ART programs: generation pauses at each tool call, the tool runs, generation resumes.

    runner = ProgramRunner(llm, tools, mode="pause", max_steps=6, segment_tokens=96)
    traces = runner.run(prefix, heads)     # prefix: demonstrations; heads: "Description/Input" per item

Modes (all batch every active program of a round into one `llm.generate` call):
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
from retrace.records import Request, Sampling
from retrace.tools._interface import ToolCall, ToolOutput, tool_name

END_STOPS = ("\n----", "\nDescription:", "\nInput:")
PAUSE_STOPS = ("\n#",) + END_STOPS
MODES = ("pause", "regenerate", "notools")
_ANS_LINE = re.compile(r"(?m)^Ans:[^\n]*")
_MARKER = re.compile(r"(?m)^(?=Description:|Input:|Q\d+:|#\d+:|Ans:)")


@dataclass
class Trace:
    head: str
    sample_index: int = 0
    seed: int = 0                   # the engine seed of every request of this program
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
    return (body[:m.end()], True) if m else (body, False)


def render_steps(steps: list[Step]) -> str:
    lines = []
    for s in steps:
        lines.append(f"Q{s.index}: [{s.tag}] {s.instruction}")
        if s.output is not None:
            lines.append(output_block(s.index, s.output).lstrip("\n"))
    return "\n".join(lines)


class ProgramRunner:
    def __init__(self, llm, tools: dict, mode: str = "pause", max_steps: int = 6,
                 segment_tokens: int = 96, program_tokens: int = 320, temperature: float = 0.0,
                 seed: int = 0, max_rounds: int | None = None):
        if mode not in MODES:
            raise ValueError(f"unknown ART mode {mode!r}; valid: {', '.join(MODES)}")
        self.llm, self.tools, self.mode = llm, tools, mode
        self.max_steps, self.segment_tokens, self.program_tokens = max_steps, segment_tokens, program_tokens
        self.temperature, self.seed = temperature, seed
        self.max_rounds = max_rounds or 2 * max_steps + 2

    def run(self, prefix: str, heads: list[str], sample_indices: list[int] | None = None,
            seeds: list[int] | None = None) -> list[Trace]:
        """One program per head; `seeds` gives each its engine seed (default: the runner's)."""
        ks = sample_indices or [0] * len(heads)
        traces = [Trace(h, k, s) for h, k, s in zip(heads, ks, seeds or [self.seed] * len(heads))]
        for _ in range(self.max_rounds):
            active = [t for t in traces if not t.done]
            if not active:
                break
            self._generate(prefix, active)
            # regenerate mode looks for tools in finished programs too (it then reopens them)
            self._run_tools([t for t in active if not t.done or self.mode == "regenerate"])
        for t in traces:
            if not t.done:
                t.finish("round_limit")
            self._conclude(t)
        return traces

    # -- one generation round ------------------------------------------------------------
    def _generate(self, prefix: str, active: list[Trace]) -> None:
        pause = self.mode == "pause"
        stops = PAUSE_STOPS if pause else END_STOPS
        tokens = self.segment_tokens if pause else self.program_tokens
        reqs = [Request(prompt=prefix + t.text, sample_index=t.sample_index, tag="art",
                        sampling=Sampling(temperature=self.temperature, max_tokens=tokens,
                                          stop=stops, seed=t.seed))
                for t in active]
        for t, c in zip(active, self.llm.generate(reqs)):
            t.segments.append({"prompt_tail": t.text, "text": c.text, "finish_reason": c.finish_reason,
                               "key": c.key, "prompt_tokens": c.prompt_tokens,
                               "generated_tokens": c.generated_tokens, "cache_hit": c.cache_hit,
                               "latency_s": round(c.latency_s, 3)})
            t.body, has_answer = cut_after_answer(t.body + c.text)
            if has_answer or self.mode == "notools":
                t.finish()
            elif c.finish_reason == "length":
                t.finish("max_tokens")
            elif pause:
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
    def _run_tools(self, traces: list[Trace]) -> None:
        jobs: dict[str, list[tuple[Trace, Step, Program]]] = {}
        for t in traces:
            found = self._tool_step(t)
            if found:
                jobs.setdefault(tool_name(found[0].tag), []).append((t, *found))
        for name, items in jobs.items():
            calls = [ToolCall(s.tag, s.instruction, p.input, tuple(x for x in p.steps if x.index < s.index))
                     for _, s, p in items]
            start = time.perf_counter()
            try:
                outs = self.tools[name].run_batch(calls)
            except Exception as e:  # a broken tool fails its calls, not the job
                outs = [ToolOutput(f"Error: {type(e).__name__}", ok=False, error=f"{type(e).__name__}: {e}")
                        for _ in calls]
            each = (time.perf_counter() - start) / len(calls)
            for (t, s, p), call, out in zip(items, calls, outs):
                self._record_tool(t, s, p, name, call, out, each)

    def _tool_step(self, t: Trace) -> tuple[Step, Program] | None:
        """The step whose tool should run now: the pending one (pause) or the first not yet run."""
        if self.mode == "pause":
            prog = parse_partial(t.text)
            return (prog.pending, prog) if prog.pending is not None else None
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

    def _record_tool(self, t: Trace, s: Step, p: Program, name: str, call: ToolCall,
                     out: ToolOutput, latency: float) -> None:
        t.tool_calls.append({"step": s.index, "tool": name, "input": call.instruction, "output": out.text,
                             "ok": out.ok, "error": out.error, "latency_s": round(latency, 4),
                             "meta": out.meta})
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
