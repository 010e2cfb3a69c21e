"""DRR prompts (Appendix B templates) and reply parsing."""

from retrace.drr import dm_data, leak, prompts
from tests.unit.drr_fakes import PROBLEMS

P = PROBLEMS[0]
CTX = [{"answer": "0", "rationale": "Mars is red."}, {"answer": "2", "rationale": "Venus is hot."}]


def test_one_renderer_prints_past_attempts_for_the_reasoner_the_dm_and_the_leak_check():
    for strategy in ("exploration", "gradual"):
        env = prompts.render_context(CTX, strategy)
        assert env in prompts.turn_messages(P, CTX, 2, strategy)[1].content  # the re-prompt
        row = {"question": "Q?", "context": CTX, "answer": "1", "rationale": "Jupiter."}
        assert env in dm_data.dm_input_text(row, "", strategy)  # the DM input
        assert env in leak._model_spans({"context": CTX})  # what the leak check trusts
    assert "Wrong Answer! Try again." in prompts.render_context(CTX, "exploration")


def test_gradual_context_numbers_attempts_and_does_not_say_wrong():
    text = prompts.render_context(CTX, "gradual")
    assert "LLM Answer 2: 2\nRationale 2: Venus is hot." in text
    assert "Wrong" not in text and text.endswith("more accurate answer.")


def test_gradual_env_line_follows_each_attempt():
    """Old behaviour: one "Env:" line after all attempts. Appendix B appends it per attempt."""
    text = prompts.render_context(CTX, "gradual")
    assert text.count("Env: The previous response was insufficient") == 2
    assert "Rationale 1: Mars is red.\nEnv: The previous response" in text
    assert text.index("Env:") < text.index("LLM Answer 2")
    assert text in dm_data.dm_input_text(
        {"question": "Q?", "context": CTX, "answer": "1", "rationale": "r"}, "", "gradual"
    )


def test_exploration_switches_system_prompt_after_turn_one_gradual_does_not():
    first = prompts.turn_messages(P, [], 0, "exploration")
    later = prompts.turn_messages(P, CTX[:1], 1, "exploration")
    assert "knowledgeable question-answering assistant" in first[0].content
    assert "think outside the box" in later[0].content
    assert "Previous LLM Answer: Answer: 0" in later[1].content
    g0, g1 = prompts.turn_messages(P, [], 0, "gradual"), prompts.turn_messages(P, CTX, 2, "gradual")
    assert g0[0].content == g1[0].content
    assert "0. Mars\n1. Jupiter" in first[1].content


def test_reply_parsing():
    assert prompts.split_reply("Answer: 1 Rationale: Jupiter is largest.") == ("1", "Jupiter is largest.")
    assert prompts.split_reply("**Answer:** 2\n**Rationale:** hot") == ("2", "hot")
    assert prompts.split_reply("I think it's Mars") == ("", "I think it's Mars")
    assert prompts.answer_letter("1", P.choices) == "B"
    assert prompts.answer_letter("[3]", P.choices) == "D"
    assert prompts.answer_letter("7", P.choices) is None
    assert prompts.answer_letter("Jupiter", P.choices) == "B"
    assert prompts.answer_letter("C", P.choices) == "C"
    assert prompts.answer_letter("none of the above", P.choices) is None
    assert prompts.is_abstention("'None of the above'")


def test_selfcritic_prompts_and_final_answer():
    msgs = prompts.selfcritic_messages(P, ["I pick (2)", "It is wrong"])
    assert [m.role for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    assert "Review your previous answer" in msgs[2].content
    assert "improve your answer" in msgs[4].content
    assert prompts.selfcritic_letter("first (0) then finally (1)", P.choices) == "B"
    assert prompts.selfcritic_letter("no number", P.choices) is None


def test_loose_answers_without_the_format():
    """Real SmolLM2-135M replies to the DRR prompts (results/cache of a plumbing run)."""
    mammals = ("Shark", "Trout", "Dolphin", "Octopus")
    assert prompts.split_reply("1. Shark\n\nThe answer is 2. Dolphin")[0] == "2. Dolphin"
    assert prompts.split_reply("2. Dolphin is a mammal")[0] == "2. Dolphin is a mammal"
    assert prompts.split_reply("Dolphins are mammals")[0] == ""
    assert prompts.answer_letter(prompts.split_reply("1. Shark\n\nThe answer is 1. Shark")[0], mammals) == "A"
    days = ("364", "365", "367", "366")
    assert prompts.answer_letter(prompts.split_reply("The answer is 366.")[0], days) == "D"
    assert prompts.answer_letter("1", days) == "B"  # a bare number that is no choice's text: an index
    assert (
        prompts.answer_letter("2", ("1", "3", "2", "4")) == "C"
        and prompts.answer_letter("2", ("2", "3", "5", "4")) == "C"
    )
    assert prompts.answer_letter("3. Paris", ("Rome", "Madrid", "Berlin", "Paris")) == "D"
