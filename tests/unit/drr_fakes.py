"""Fakes for DRR unit tests: problems, settings, and a reasoner whose reply depends on the turn."""

from __future__ import annotations

from retrace.drr import settings
from retrace.util.records import Completion, Problem

PROBLEMS = [
    Problem(
        id=f"t/q{i}",
        question=f"Which planet is number {i}?",
        gold="B",
        choices=("Mars", "Jupiter", "Venus", "Mercury"),
    )
    for i in range(4)
]


def cfg(**changes) -> dict:
    c = settings.load({"models": ["fake"], "datasets": ["t"], "backbone": "minilm"})
    c.update(changes)
    return c


class TurnLLM:
    """Replies "Answer: <script[turn]>" where turn = number of past attempts shown in the prompt;
    `script` maps problem question substrings to per-turn answers (default: always "0").
    `run_tasks` drives scheduler tasks as a synchronous engine gets them: in waves, every
    ready request in one `generate` call."""

    def __init__(self, script: dict[str, list[str]] | None = None):
        self.script, self.requests = script or {}, []

    def generate(self, requests):
        out = []
        for r in requests:
            self.requests.append(r)
            user = [m.content for m in r.messages if m.role == "user"][-1]
            turn = user.count("Previous LLM Answer:") + user.count("Rationale ")
            answers = next((v for k, v in self.script.items() if k in user), ["0"])
            a = answers[min(turn, len(answers) - 1)]
            out.append(
                Completion(
                    text=f"Answer: {a} Rationale: because {turn}",
                    finish_reason="stop",
                    prompt_tokens=10,
                    generated_tokens=5,
                    key=f"k{len(self.requests)}",
                )
            )
        return out

    def run_tasks(self, tasks):
        tasks = list(tasks)
        results: list = [None] * len(tasks)
        answers = [(i, None) for i in range(len(tasks))]  # (task, completion to send it)
        while answers:
            wave = []
            for i, completion in answers:
                try:
                    wave.append((i, tasks[i].send(completion)))
                except StopIteration as stop:
                    results[i] = stop.value
            answers = list(zip([i for i, _ in wave], self.generate([r for _, r in wave]))) if wave else []
        return results
