"""Answer extraction on real model outputs: Qwen2.5-Coder-0.5B-Instruct Q4_K_M, greedy,
on the bundled smoke sets (retrace default run, 2026-12-02; last 400 characters of each output).
The expected answers were checked by hand against each output's final statement; they are
what the model said, not the gold (several MC answers are wrong, and must stay wrong)."""

from __future__ import annotations

import pytest

from retrace.util.registry import TASKS

REAL = {
    "smoke_mc": [
        (
            "smoke_mc/q01",
            "s use to produce energy and oxygenates water.\n\nC) Helium: Plants take helium from the air to make their food. Helium is a gas that plants use to produce energy and oxygenates water.\n\nD) Carbon dioxide: Plants take carbon dioxide from the air to make their food. Carbon dioxide is a gas that plants use to produce energy and oxygenates water.\n\nBased on this analysis, the correct answer is:\n\nAnswer: C",
            "C",
        ),
        (
            "smoke_mc/q04",
            "ey: The kidneys are the organs that pump blood through the body. They are located in the kidneys and are responsible for carrying oxygen and nutrients throughout the body.\n\nD) Heart: The heart is the organ that pumps blood through the body. It is located in the heart and is responsible for carrying oxygen and nutrients throughout the body.\n\nBased on this analysis, the correct answer is:\n\nAnswer: C",
            "C",
        ),
        ("smoke_mc/q05", "Answer: C", "C"),
        (
            "smoke_mc/q06",
            "the northwestern part of France.\n\nB) Madrid - Madrid is the capital city of Spain. It is located in the northwestern part of Spain.\n\nC) Rome - Rome is the capital city of Italy. It is located in the northwestern part of Italy.\n\nD) Paris - Paris is the capital city of France. It is located in the northwestern part of France.\n\nBased on this analysis, the correct capital city of France is:\n\nAnswer: D",
            "D",
        ),
        (
            "smoke_mc/q07",
            "**Count the sides**: Since a hexagon has six sides, we can count them as follows:\n   - The first side is the longest side.\n   - The second side is the next longest side.\n   - The third side is the next longest side.\n   - The fourth side is the next longest side.\n   - The fifth side is the next longest side.\n   - The sixth side is the shortest side.\n\nTherefore, the hexagon has six sides.\n\nAnswer: D",
            "D",
        ),
        (
            "smoke_mc/q08",
            "ice used to measure pressure. It is not specifically used to measure temperature.\n\nC) Thermometer - A thermometer is a device used to measure temperature. It is specifically used to measure temperature.\n\nD) Compass - A compass is a device used to measure the direction of a magnetic field. It is not specifically used to measure temperature.\n\nBased on this analysis, the correct answer is:\n\nAnswer: C",
            "C",
        ),
    ],
    "smoke_math": [
        (
            "smoke_math/m01",
            " follow these steps:\n\n1. Identify the number of eggs in one box.\n2. Multiply the number of eggs in one box by the number of boxes.\n\nStep 1: Identify the number of eggs in one box.\nThe box holds 6 eggs.\n\nStep 2: Multiply the number of eggs in one box by the number of boxes.\n\\[ 6 \\text{ eggs/box} \\times 5 \\text{ boxes} = 30 \\text{ eggs} \\]\n\nTherefore, the number of eggs in 5 boxes is \\(\\boxed{30}\\).",
            "30",
        ),
        (
            "smoke_math/m04",
            "oning:\n\n1. Identify the total number of cookies. According to the problem, there are 24 cookies.\n2. Identify the number of children. According to the problem, there are 4 children.\n3. Divide the total number of cookies by the number of children. This can be expressed as:\n   \\[\n   \\frac{24}{4}\n   \\]\n4. Perform the division:\n   \\[\n   24 \\div 4 = 6\n   \\]\n\nTherefore, each child gets \\boxed{6} cookies.",
            "6",
        ),
        (
            "smoke_math/m05",
            "e bus starts with 15 passengers.\n2. **Passengers on the bus after getting on**: 7 passengers get on.\n3. **Passengers on the bus after getting off**: 3 passengers get off.\n\nFirst, we add the passengers on the bus after getting on:\n\\[ 15 + 7 = 22 \\]\n\nNext, we subtract the passengers on the bus after getting off:\n\\[ 22 - 3 = 19 \\]\n\nTherefore, the number of passengers on the bus now is \\(\\boxed{19}\\).",
            "19",
        ),
        (
            "smoke_math/m06",
            "w these steps:\n\n1. Calculate the number of days in a week.\n2. Multiply the number of days by the number of pages Sam reads per day.\n\nFirst, we know that there are 7 days in a week. Next, we multiply the number of days by the number of pages Sam reads per day:\n\\[ 10 \\text{ pages/day} \\times 7 \\text{ days} = 70 \\text{ pages} \\]\n\nTherefore, the number of pages Sam reads in one week is \\(\\boxed{70}\\).",
            "70",
        ),
        (
            "smoke_math/m07",
            "number of tulips.\n\nStep 1: Identify the number of rows in the garden.\nThe garden has 4 rows.\n\nStep 2: Identify the number of tulips in each row.\nThe garden has 8 tulips in each row.\n\nStep 3: Multiply the number of rows by the number of tulips in each row.\n\\[ 4 \\text{ rows} \\times 8 \\text{ tulips per row} = 32 \\text{ tulips} \\]\n\nTherefore, the total number of tulips in the garden is \\(\\boxed{32}\\).",
            "32",
        ),
        (
            "smoke_math/m08",
            "To determine how many weeks Lena needs to save $45, we can follow these steps:\n\n1. Identify Lena's weekly savings: $5.\n2. Identify the total amount Lena needs to save: $45.\n3. Divide the total amount by her weekly savings to find out how many weeks it will take her to save $45.\n\nLet's perform the division:\n\n\\[\n\\frac{45}{5} = 9\n\\]\n\nSo, it takes Lena \\boxed{9} weeks to save $45.",
            "9",
        ),
    ],
}


def _problems(task):
    problems, _ = task.load({"name": task.name, "task": task.name, "source": "bundled"}, None)
    return {p.id: p for p in problems}


@pytest.mark.parametrize("dataset", sorted(REAL))
def test_extracts_what_the_model_answered(dataset):
    task = TASKS.get(dataset)
    problems = _problems(task)
    for pid, text, expected in REAL[dataset]:
        assert task.extract_answer(text, problems[pid]) == expected, pid


def test_correctness_follows_the_gold_not_the_wording():
    task = TASKS.get("smoke_mc")
    problems = _problems(task)
    verdicts = {
        pid: task.is_correct(task.extract_answer(t, problems[pid]), problems[pid])
        for pid, t, _ in REAL["smoke_mc"]
    }
    # q01 ("Answer: C") and q04 ("Answer: C") are wrong answers; q05, q06 are right
    assert (verdicts["smoke_mc/q01"], verdicts["smoke_mc/q04"]) == (False, False)
    assert (verdicts["smoke_mc/q05"], verdicts["smoke_mc/q06"]) == (True, True)
