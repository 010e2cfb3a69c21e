"""One ART program with code steps, run as its own process: the caller of `run_code` that
test_resume.py kills. On the scripted backend, with a request cache on disk (as an ART job's).

    python tests/workflow/art_code_program.py CACHE_DIR WALL_S   # prints {"tools": [...], "sent": n}

The program: generate and run code that prints a set (its order hangs on the hash seed, and
the next prompt holds it), then generate and run code that sleeps (where the test kills it).
`sent`: the requests that reached the engine, i.e. were not answered from the cache.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))  # fake_backend

from fake_backend import engine_requests, scripted_llm

from retrace.art.runner import ProgramRunner
from retrace.tools.code import CodeExecute, CodeGenerate

FRUIT = '{"apple", "pear", "fig", "plum", "kiwi", "lime", "date", "yuzu"}'
PREFIX = "Description: demo\nInput: d\nQ1: [EOQ]\nAns: d\n----\n"
HEAD = "Description: Name the fruit, then wait.\nInput: fruit"
# First key found in the prompt wins: later stages of the program come first.
SCRIPT = {
    "Instruction: wait a while": "```python\nimport time\ntime.sleep(600)\n```",
    "Instruction: list the fruit": f"```python\nprint(list({FRUIT}))\n```",
    "#4: Error": " [EOQ]\nAns: done",
    "time.sleep(600)": " [code execute] Run #3.\n#4: made up",
    "'apple'": " [code generate] wait a while\n#3: made up",  # the printed list (single quotes)
    "print(list(": " [code execute] Run #1.\n#2: made up",
    "Input: fruit": " [code generate] list the fruit\n#1: made up",
}


def main(cache: str, wall_s: float) -> None:
    llm, engines = scripted_llm(Path(cache), {"script": SCRIPT})
    tools = {"code_generate": CodeGenerate(llm=llm), "code_execute": CodeExecute({"wall_s": wall_s})}
    (trace,) = ProgramRunner(llm, tools).run(PREFIX, [HEAD])
    outputs = [c["output"] for c in trace.tool_calls]
    print(json.dumps({"tools": outputs, "sent": len(engine_requests(engines)), "answer": trace.answer}))


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
