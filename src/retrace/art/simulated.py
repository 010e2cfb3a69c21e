"""ART on the simulated engine (backends/simulated.py) for `retrace rehearse`: texts in ART's
program grammar that the real runner parses and runs. NOT a model.

    from retrace.art.simulated import ART_TAGS, text
    if request.tag in ART_TAGS:            # how SimulatedBackend answers ART's requests
        completion_text = text(backend, request)

ART's stages (art/stages.py) give a simulated engine the job's task data (`problems`), the task
as `dataset` and the job's label (`art`, `art_sc`, `art@feedback`, `fewshot`, ...; a cluster
selection job answers as `art`). Its requests are tagged `art` (a program's segments,
art/runner.py), `art-baseline` (few-shot and AutoCoT, art/baselines.py) and `code_generate`
(the code tool's request, tools/code.py); the question is the last `Input:` of the prompt that
names one of the task's problems (the program head, the few-shot or AutoCoT query).

What the simulated engine writes (a program is three steps, whatever the mode):

    Q1: [code generate] Write Python that adds 2 and 2.
    #1: <the code tool's output>
    Q2: [code execute] Execute the code in #1.
    #2: <the sandbox's output>
    Q3: [EOQ]
    Ans: <the gold answer, or the question's one wrong answer>

- pause mode (stops at "\\n#"): one step per request; the runner pauses at each tool step and
  the tools really run: `code generate` sends its own request (answered with a two-line Python
  program), `code execute` runs it in the configured sandbox (WASM by default). Then "[EOQ]"
  and the answer.
- regenerate / notools (no "\\n#" stop): the rest of the program from the step the prompt
  reached, its outputs filled by the "model" ("#1: ans = 2 + 2", "#2: 4"); regenerate
  replaces them with the tools' real outputs and asks again, notools keeps them.
- few-shot: the answer; AutoCoT: one reasoning line and "Ans: answer" (zero-shot chains on the
  held-out pool pass AutoCoT's heuristics, so each cluster's first candidate is its demo).
What the answer is: the spine's draw (SimulatedBackend._correct: per-question difficulty, the
planted points of (model, task, label), correlation between labels on a question, temperature
0 = identical seeds), keyed by the job's label and the program's seed and sample index, so
every segment of one program draws the same answer and self-consistency's k programs are k
independent draws. The text is the gold answer as a demonstration writes it (metrics.gold_answer:
"(B) text" for multiple choice) or the question's one wrong answer (another choice, picked per
question, or backends.simulated.wrong_answer): a vote weighs right against one wrong answer.
Not covered: the demonstrations, the selected library tasks and the tool outputs shape nothing
(cluster selection sees ties and keeps its first cluster); no text is cut at max_tokens (the
texts are a few dozen words); a program never fails to parse.
"""

from __future__ import annotations

import re
from dataclasses import replace

from retrace.util.records import Request

ART_TAGS = ("art", "art-baseline", "code_generate")
CODE = "```python\nans = 2 + 2\nprint(ans)\n```"
STEPS = (
    ("code generate", "Write Python that adds 2 and 2.", "ans = 2 + 2"),
    ("code execute", "Execute the code in #1.", "4"),
)
_NEXT = re.compile(r"\nQ(\d+):\s*$")  # a program's prompt ends at the step it asks for
_ENDS = ("\nQ1:", "\nAns:", "\nReasoning:", "\n----")  # what follows a query's input


def _key(text: str) -> str:
    return " ".join(text.split())


def inputs(problems: dict) -> dict[str, str]:
    """{a problem's input as ART's prompts show it, whitespace collapsed: its id} (the first
    id of problems sharing an input)."""
    from retrace.art.metrics import format_input

    out: dict[str, str] = {}
    for pid, p in problems.items():
        out.setdefault(_key(format_input(p)), pid)
    return out


def question(index: dict[str, str], prompt: str) -> str:
    """The id of the problem whose input follows the prompt's last `Input:` naming one."""
    start = len(prompt)
    while (start := prompt.rfind("Input:", 0, start)) >= 0:
        rest = prompt[start + len("Input:") :]
        end = min((i for i in (rest.find(e) for e in _ENDS) if i >= 0), default=len(rest))
        pid = index.get(_key(rest[:end]))
        if pid is not None:
            return pid
    raise ValueError("simulated ART answer: no Input: of the prompt names a problem of engine['problems']")


def answer(backend, qid: str, request: Request) -> str:
    """The gold answer or the question's one wrong answer, drawn as the spine's answers are."""
    from retrace.art.metrics import gold_answer
    from retrace.backends.simulated import unit, wrong_answer

    problem = backend.problems[qid]
    draw = replace(request, tag=f"art/{backend.engine['label']}")
    if backend._correct(qid, draw):
        return " ".join(gold_answer(problem).split())
    if problem.choices:
        from retrace.tasks.base import LETTERS

        others = [i for i in range(len(problem.choices)) if LETTERS[i] != problem.gold]
        i = others[int(unit("art-wrong", qid) * len(others))]
        return f"({LETTERS[i]}) {' '.join(problem.choices[i].split())}"
    return wrong_answer(problem.gold)


def program(step: int, ans: str, pause: bool) -> str:
    """The continuation of a program whose prompt ends at "Q<step>:"."""
    if step > len(STEPS):
        return f" [EOQ]\nAns: {ans}"
    tag, instruction, output = STEPS[step - 1]
    if pause:  # the engine stops at "\n#", before the step's output
        return f" [{tag}] {instruction}"
    return f" [{tag}] {instruction}\n#{step}: {output}\n" + f"Q{step + 1}:" + program(step + 1, ans, False)


def text(backend, request: Request) -> str:
    """The completion of one of ART's requests (module docstring)."""
    if request.tag == "code_generate":
        return CODE
    prompt = request.prompt or ""
    if getattr(backend, "art_inputs", None) is None:
        backend.art_inputs = inputs(backend.problems)
    qid = question(backend.art_inputs, prompt)
    ans = answer(backend, qid, request)
    if request.tag == "art-baseline":
        if prompt.rstrip().endswith("Ans:"):  # few-shot: the answer, up to the "\n" stop
            return f" {ans}"
        return f" Simulated reasoning.\nAns: {ans}"  # AutoCoT's chain of thought
    step = _NEXT.search(prompt)
    return program(int(step.group(1)) if step else 1, ans, "\n#" in request.sampling.stop)


GRID = 400  # points per axis of the integral over difficulty and question effect


def vote_gain(points: float, k: int, engine: dict) -> float:
    """What self-consistency's vote over k programs adds to the per-sample accuracy (base +
    points, `points` a fraction) in expectation, as this engine draws the programs: each right
    with the question's per-sample probability (given its shared effect), one wrong answer, a
    tie to the earliest program (right half the time). k <= 2: exactly 0."""
    import numpy as np
    from scipy.special import betaincinv
    from scipy.stats import binom, norm

    if k <= 2:
        return 0.0
    base, conc, rho = (float(engine[x]) for x in ("base_accuracy", "concentration", "correlation"))
    u = (np.arange(GRID) + 0.5) / GRID
    p = betaincinv(base * conc, (1 - base) * conc, u)
    if points >= 0:
        p = p + min(1.0, points / max(1e-9, 1 - base)) * (1 - p)
    else:
        p = p * (1 - min(1.0, -points / max(1e-9, base)))
    p = np.clip(p, 1e-12, 1 - 1e-12)[:, None]
    right = norm.cdf((norm.ppf(p) - rho * norm.ppf(u)[None, :]) / np.sqrt(1 - rho * rho))
    tie = 0.5 * binom.pmf(k // 2, k, right) if k % 2 == 0 else 0.0
    return float((binom.sf(k // 2, k, right) + tie).mean() - right.mean())
