"""The drr: block, the question-level split and rerun keys."""
import pytest

from retrace.drr import settings, stages
from tests.unit.drr_fakes import PROBLEMS, cfg


def test_unknown_keys_and_bad_values_are_refused():
    with pytest.raises(ValueError, match="unknown key 'max_turn'"):
        settings.load({"max_turn": 3})
    with pytest.raises(ValueError, match="drr.dm: unknown key 'lrr'"):
        settings.load({"dm": {"lrr": 1}})
    with pytest.raises(ValueError, match="strategy"):
        settings.load({"strategy": "greedy"})
    with pytest.raises(ValueError, match="backbone"):
        settings.load({"backbone": "bert-huge"})
    with pytest.raises(ValueError, match="datasets\\[0\\]"):
        settings.load({"datasets": [{"nme": "x"}]})


def test_defaults_follow_the_paper():
    c = settings.load({})
    assert (c["max_turns_distil"], c["max_turns_infer"]) == (4, 5)
    assert c["dm"]["accept_weight_ratio"] == 3.0 and c["dm"]["dev_fraction"] == 0.2
    assert settings.entries(settings.load({"datasets": ["a", {"name": "b", "train": "b_train"}]})) == \
        [{"name": "a", "train": None}, {"name": "b", "train": "b_train"}]


def test_question_split_is_disjoint_and_deterministic():
    problems = PROBLEMS * 1
    a = stages.split_questions(problems, 0.5, 0, "t")
    b = stages.split_questions(problems, 0.5, 0, "t")
    assert a == b and len(a[0]) == 2
    assert not {p.id for p in a[0]} & {p.id for p in a[1]}


def test_rerun_keys_see_config_templates_and_not_other_stages(tmp_path, monkeypatch):
    c = cfg()
    k = settings.stage_key("distil", c)
    assert settings.stage_key("distil", {**c, "max_tokens": 7}) != k
    assert settings.stage_key("distil", {**c, "dm": {**c["dm"], "epochs": 9}}) == k  # DM only
    assert settings.stage_key("train", {**c, "dm": {**c["dm"], "epochs": 9}}) != settings.stage_key("train", c)
    assert settings.stage_key("train", {**c, "dm": {**c["dm"], "threads": 1}}) == settings.stage_key("train", c)
    names = {p.name for p in settings.stage_files("generate")}
    assert {"abstain_qa.j2", "selfcritic_review.j2", "exploration.j2"} <= names
    assert "abstain_qa.j2" not in {p.name for p in settings.stage_files("distil")}
