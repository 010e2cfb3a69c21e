"""Plurality vote: equivalence grouping, None handling, deterministic tie-break."""

from retrace.scoring.vote import group_answers, plurality_index, plurality_vote


def exact(a, b):
    return a == b


def numeric(a, b):
    """A fake same_answer under which "0.5" and "1/2" are the same answer."""

    def val(s):
        n, _, d = s.partition("/")
        return float(n) / float(d or 1)

    return abs(val(a) - val(b)) < 1e-9


def test_equivalent_answers_vote_together():
    answers = ["1/2", "3", "0.5", "3", "0.50"]
    assert plurality_vote(answers, exact) == "3"  # raw strings: "3" has 2, others 1
    assert plurality_vote(answers, numeric) == "1/2"  # equivalence: one half has 3


def test_groups_in_order_of_first_appearance():
    assert group_answers(["b", None, "a", "b"], exact) == [[0, 3], [2]]


def test_none_never_wins_unless_all_none():
    assert plurality_vote([None, None, None, "7"], exact) == "7"
    assert plurality_vote([None, None], exact) is None
    assert plurality_vote([], exact) is None
    assert plurality_index([None], exact) is None


def test_tie_goes_to_earliest_first_member():
    assert plurality_vote(["a", "b", "b", "a"], exact) == "a"
    assert plurality_vote(["b", "a", "a", "b"], exact) == "b"
    assert plurality_index([None, "x", "y"], exact) == 1


def test_returns_first_member_spelling():
    assert plurality_vote(["0.5", "1/2", "2"], numeric) == "0.5"
