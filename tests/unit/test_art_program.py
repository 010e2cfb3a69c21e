"""ART's program grammar: valid programs, errors that name the line, completeness."""

import pytest

from retrace.art.library import load_library, read_demos
from retrace.art.program import ProgramError, parse, parse_partial

PROGRAM = """Description: Solve it.
Input: What is 3 plus 4?
second input line
Q1: [code generate] Write code that adds 3 and 4.
#1:
ans = 3 + 4
print(ans)  # a comment line
Q2: [code execute] Execute the code in #1.
#2: 7
Q3: [EOQ]
Ans: 7"""


def test_a_valid_program_parses_into_steps_and_answer():
    p = parse(PROGRAM)
    assert p.complete and p.answer == "7" and p.description == "Solve it."
    assert p.input == "What is 3 plus 4?\nsecond input line"
    assert [(s.index, s.tag) for s in p.steps] == [(1, "code generate"), (2, "code execute")]
    assert p.steps[0].output == "ans = 3 + 4\nprint(ans)  # a comment line"
    assert p.steps[1].instruction == "Execute the code in #1." and p.steps[1].output == "7"


@pytest.mark.parametrize(
    "cut, line",
    [
        ("Q3: [EOQ]\nAns: 7", 9),  # no [EOQ] and no Ans: not complete
        ("Ans: 7", 10),  # [EOQ] without Ans:
    ],
)
def test_completeness_needs_eoq_and_ans(cut, line):
    text = PROGRAM.replace(cut, "").rstrip("\n")
    with pytest.raises(ProgramError, match="ends early"):
        parse(text)
    assert parse_partial(text.replace("Q3: [EOQ]", "")).complete is False


def test_ans_without_eoq_is_refused_at_its_line():
    with pytest.raises(ProgramError, match=r"^line 10: unexpected"):
        parse(PROGRAM.replace("Q3: [EOQ]\n", ""))


@pytest.mark.parametrize(
    "old, new, line, what",
    [
        ("Q2: [code execute] Execute", "Q2: Execute", 8, "Qi: \\[tool or skill\\]"),
        ("#2: 7", "#3: 7", 9, "#3 does not answer"),
        ("Q2: [code execute]", "Q4: [code execute]", 8, "step Q4 follows Q1"),
    ],
)
def test_errors_point_at_the_line(old, new, line, what):
    with pytest.raises(ProgramError, match=rf"^line {line}: .*{what}") as e:
        parse(PROGRAM.replace(old, new))
    assert e.value.line == line


def test_partial_program_exposes_the_pending_tool_call():
    p = parse_partial("Input: x\nQ1: [search] When was the telegram invented?")
    assert not p.complete and p.pending.tag == "search" and p.pending.output is None


def test_every_shipped_demonstration_is_a_complete_program():
    base = load_library(["base"])
    assert len(base.tasks) == 15 and len(base.clusters()) == 5  # the paper's library (App. A.1)
    assert all(len(t.demos) == 2 for t in base.tasks.values())
    lib = load_library(["base", "feedback"])
    assert all(len(t.demos) == 2 for t in lib.tasks.values())
    assert lib.tasks["word_unscrambling"].path.parent.parent.name == "feedback"


def test_the_feedback_version_is_the_base_library_plus_the_human_written_task():
    """feedback/index.yaml replaces base/index.yaml (the last one wins): it must keep every base
    task as it is and add only the human feedback for word_unscrambling (ART Table 20), whose
    programs use the [lookup] dictionary tool; the base library has no such task."""
    from retrace.art.program import parse

    base, lib = load_library(["base"]), load_library(["base", "feedback"])
    assert set(lib.tasks) - set(base.tasks) == {"word_unscrambling"} and "word_unscrambling" not in base.tasks
    assert all(
        lib.tasks[n].description == t.description and lib.tasks[n].cluster == t.cluster
        for n, t in base.tasks.items()
    )
    edited = lib.tasks["word_unscrambling"]
    assert lib.clusters()["string_ops"][0] == "word_unscrambling"  # cluster selection takes a prefix
    assert all("lookup" in parse(d).tags() for d in edited.demos)


def test_a_broken_library_file_names_file_and_line(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text(PROGRAM + "\n----\n" + PROGRAM.replace("#2: 7", "#5: 7") + "\n")
    with pytest.raises(ProgramError, match=rf"t.txt:{11 + 1 + 9}:"):
        read_demos(f)
