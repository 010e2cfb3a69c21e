"""The simulated discriminator (drr/simulated_dm.py) and DRR's stages on the simulated engine.

The end-to-end test runs DRR's real stage code (questions, distillation, split, train, generate,
infer, leak check, summarise, the claims stage's Holm) without Snakemake on two synthetic
multiple-choice datasets: "a" with DRR planted +20 points, "b" null. No model is loaded."""

from __future__ import annotations

import json

import pytest

from retrace.app import rehearse, rehearse_workflow
from retrace.backends.simulated import SimulatedBackend
from retrace.drr import prompts, settings, simulated_dm
from retrace.store import data
from retrace.util.records import Problem, Request, Sampling

ENGINE = {"base_accuracy": 0.4, "concentration": 2.0, "correlation": 0.6}
CHOICES = ("apple", "river", "stone", "cloud")


def problems(name: str, n: int) -> list[Problem]:
    return [
        Problem(
            id=f"{name}/q{i}",
            question=f"Which thing is number {i} of {name}?",
            gold="ABCD"[i % 4],
            choices=CHOICES,
        )
        for i in range(n)
    ]


def test_skill_plants_the_gain_exactly_and_refuses_what_it_cannot_plant():
    assert simulated_dm.skill(0.0, ENGINE, 5) == 0.0 and simulated_dm.gain(0.0, ENGINE, 5) == pytest.approx(
        0.0, abs=1e-12
    )
    s = simulated_dm.skill(0.10, ENGINE, 5)
    assert 0 < s < 1 and simulated_dm.gain(s, ENGINE, 5) == pytest.approx(0.10, abs=1e-6)
    assert simulated_dm.skill(0.10, ENGINE, 2) > s  # fewer turns to rescue a question: more skill
    for points in (-0.05, 0.5):
        with pytest.raises(ValueError, match="simulated DM plants gains"):
            simulated_dm.skill(points, ENGINE, 5)


def test_decide_accepts_the_last_turn_and_knows_with_probability_skill():
    assert simulated_dm.decide(0.0, False, True, "drr", 0, "q", 4) == ("accept", 1.0)
    wrong = [simulated_dm.decide(0.6, False, False, "drr", 0, f"q{i}", 1) for i in range(4000)]
    accepted = sum(d == "accept" for d, _ in wrong) / len(wrong)
    assert accepted == pytest.approx(0.2, abs=0.03) and all(p == pytest.approx(0.2) for _, p in wrong)
    assert all(
        d == "accept"
        for d, _ in (simulated_dm.decide(1.0, True, False, "drr", 0, f"q{i}", 0) for i in range(50))
    )


def _episode_accuracy(engine, probs, s: float, turns: int = 5) -> tuple[float, float, int]:
    """(DRR accuracy, CoT accuracy, abstentions) over simulated rejection paths."""
    drr = cot = abstained = 0
    for p in probs:
        for t in range(turns):
            request = Request(
                messages=(), prompt="x", sampling=Sampling(temperature=0.6, seed=t), tag=f"{p.id}#turn{t}"
            )
            letter = prompts.reply_letter(engine.generate([request])[0].text, p.choices)
            decision, _ = simulated_dm.decide(s, letter == p.gold, t == turns - 1, "drr", 0, p.id, t)
            cot += t == 0 and letter == p.gold
            if decision == "accept":
                drr += letter == p.gold
                break
        else:
            abstained += 1
    return drr / len(probs), cot / len(probs), abstained


@pytest.mark.parametrize("points", [0.0, 0.10])
def test_the_planted_accuracy_gain_is_met_on_a_seeded_sample(tmp_path, points):
    probs = problems("d", 2000)
    data.write_problems(tmp_path / "d.jsonl", probs)
    engine = SimulatedBackend(
        {"name": "m"},
        {
            "problems": str(tmp_path / "d.jsonl"),
            "dataset": "d",
            "label": "cot",
            "tokens_mean": 40,
            "batch_size": 8,
        },
    )
    drr, cot, abstained = _episode_accuracy(engine, probs, simulated_dm.skill(points, ENGINE, 5))
    assert abstained == 0 and cot == pytest.approx(0.4, abs=0.04)
    assert drr - cot == pytest.approx(points, abs=0.025)  # SE of the paired gain ~0.008 at n = 2000


@pytest.mark.parametrize("points", [0, 30])
def test_the_simulated_sft_lora_answers_at_its_planted_accuracy_and_is_labelled(tmp_path, points):
    """`sft_lora.hf_model: simulated` trains nothing: each evaluation question is answered once
    by the simulated engine under the label sft_lora, parsed and scored as a real reply."""
    from retrace.config import compose as config
    from retrace.drr import sft

    effects = tmp_path / "effects.yaml"
    effects.write_text(f"effects:\n  - {{label: sft_lora, points: {points}}}\n")
    (tmp_path / "d").mkdir()
    probs = problems("d", 1500)
    data.write_problems(tmp_path / "d" / "eval.jsonl", probs)
    cfg = settings.load(
        {
            "models": ["m"],
            "datasets": ["d"],
            "backend": "simulated",
            "sft_lora": {"enabled": True, "hf_model": "simulated"},
        }
    )
    real = config.compose

    def compose(overrides, **kw):  # the rehearsal copy's engine settings (rehearse_workflow)
        out = real(overrides, **kw)
        out["backend"]["engine"].update(effects=str(effects), tokens_mean=40)
        return out

    out = tmp_path / "sft_lora.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(config, "compose", compose)
        assert sft.run(cfg, [], [tmp_path / "d" / "eval.jsonl"], [out], seed=0) == {"losses": []}
    eps = [json.loads(line) for line in out.read_text().splitlines()]
    accuracy = sum(e["turns"][0]["correct"] for e in eps) / len(eps)
    assert len(eps) == 1500 and all(e["turns"][0]["letter"] in "ABCD" for e in eps)  # every reply parsed
    assert accuracy == pytest.approx(0.4 + points / 100, abs=0.04)  # base 0.4, +points planted
    record = json.loads((tmp_path / "sft_lora.jsonl.prov.json").read_text())
    assert record["simulated"] is True and record["hf_model"] == {"hf_model": "simulated"}


def test_check_effects_refuses_the_reasoner_labels_and_unplantable_points():
    cfg = settings.load({"models": ["m"], "datasets": ["a", "b"]})
    simulated_dm.check_effects(cfg, [{"label": "drr", "points": 10, "datasets": ["a"]}], ENGINE)
    with pytest.raises(ValueError, match="'selfcritic' on m/b"):
        simulated_dm.check_effects(cfg, [{"label": "selfcritic", "points": 5, "datasets": ["b"]}], ENGINE)
    with pytest.raises(ValueError, match="not \\+60.0"):
        simulated_dm.check_effects(cfg, [{"label": "drr_shuffled", "points": 60}], ENGINE)


def test_derive_puts_drr_on_the_simulated_reasoner_dm_and_sft_lora(tmp_path):
    from retrace.util.yamlfile import load_yaml

    root = rehearse_workflow.derive("drr_paper", 0.1, rehearse.EFFECTS, tmp_path / "run")
    config = root / "config"
    block = load_yaml(config / "experiment" / "drr_paper.yaml")["drr"]
    assert block["backend"] == "simulated" and block["backbone"] == "simulated"
    assert block["backbones"]["simulated"] == {
        "source": "simulated",
        "effects": str(rehearse.EFFECTS.resolve()),
    }
    # drr_paper enables SFT-LoRA: the copy keeps it, simulated on the CPU (drr/sft.py)
    assert block["sft_lora"]["enabled"] is True and block["sft_lora"]["hf_model"] == settings.SIMULATED
    assert block["sft_lora"]["device"] == "cpu" and block["dm"]["device"] == "cpu"
    cfg = settings.load(block)  # a valid block (no pinned revision for "simulated"): no GPU asked
    assert settings.dm_resources(cfg)["gpu"] == 0 and "sft_lora" in settings.methods(cfg)
    for name in ("commonsenseqa", "commonsenseqa_train", "openbookqa_train", "piqa", "winogrande"):
        assert load_yaml(config / "dataset" / f"{name}.yaml")["limit"] > 0, name
    engine = load_yaml(config / "backend" / "simulated.yaml")["engine"]
    assert engine["tokens_mean"] == rehearse_workflow.TOKENS_MEAN and engine["effects"].endswith(
        "effects.yaml"
    )
    assert (
        load_yaml(rehearse_workflow.CONFIG_DIR / "experiment" / "drr_paper.yaml")["drr"]["backend"] == "vllm"
    )
    effects = tmp_path / "cot.yaml"
    effects.write_text("effects:\n  - {label: cot, points: 10}\n")
    with pytest.raises(ValueError, match="reasoner"):
        rehearse_workflow.derive("drr_paper", 0.1, effects, tmp_path / "cot")


def test_drr_truths_scale_fs_rows_and_weight_the_overall_row():
    rows = [
        {"claim": "DRR beats CoT on FS(3)", "model": "m", "dataset": "a", "n_questions": "30"},
        {"claim": "DRR beats CoT on FS(3)", "model": "m", "dataset": "b", "n_questions": "10"},
        {"claim": "DRR beats CoT on FS(3)", "model": "m", "dataset": "all", "n_questions": "40"},
        {"claim": "DRR beats CoT on accuracy", "model": "m", "dataset": "a", "n_questions": "30"},
    ]
    from retrace.drr.rehearsal import planted_truths

    assert planted_truths(rows, [0.1, 0.0, 0.1, 0.1]) == pytest.approx([0.4, 0.0, 0.3, 0.1])


# ---------------------------------------------------------------- DRR end to end, no Snakemake
N = 300  # per dataset; half distil, half evaluate


@pytest.fixture(scope="module")
def drr_run(tmp_path_factory):
    from retrace.drr import episodes, leakcheck, report, stages
    from retrace.stages import claims as claims_stage
    from retrace.store import models

    tmp = tmp_path_factory.mktemp("drr_sim")
    effects = tmp / "effects.yaml"
    effects.write_text("effects:\n  - {label: drr, points: 20, datasets: [a]}\n")
    cfg = settings.load(
        {
            "models": ["m"],
            "backend": "simulated",
            "datasets": ["a", "b"],
            "train_fraction": 0.5,
            "max_tokens": 4096,  # the checkout's engine draws ~300-token answers: none cut
            "backbone": "simulated",
            "backbones": {"simulated": {"source": "simulated", "effects": str(effects)}},
        }
    )
    manifest, _ = models.materialise(
        {"name": "m", "params": 1000, "source": {"kind": "simulated"}}, tmp / "model"
    )
    (tmp / "manifest.json").write_text(json.dumps(manifest))
    run, cache = tmp / "drr" / "m" / "simulated", tmp / "cache"
    files: dict[str, list] = {"episodes": [], "train": [], "questions": [], "scan": [], "traces": []}
    for name in ("a", "b"):
        data.write_problems(tmp / f"{name}.jsonl", problems(name, N))
        q = tmp / "drr" / "questions" / name
        stages.questions(cfg, name, tmp / f"{name}.jsonl", None, q / "train.jsonl", q / "eval.jsonl")
        files["questions"] += [q / "train.jsonl", q / "eval.jsonl"]
        d = run / "distil" / name / "seed0"
        stages.distil(
            cfg,
            name,
            q / "train.jsonl",
            tmp / "manifest.json",
            "simulated",
            0,
            cache,
            d / "traces.jsonl",
            d / "prompts.jsonl",
        )
        files["traces"].append(d / "traces.jsonl")
        files["scan"].append(d / "prompts.jsonl")
    split = run / "dm" / "seed0" / "split"
    stages.split(cfg, files["traces"], 0, split)
    files["scan"] += [split / "train.jsonl", split / "dev.jsonl", split / "train_shuffled.jsonl"]
    for variant in cfg["variants"]:
        v = run / "dm" / "seed0" / variant
        stages.train(cfg, variant, split, 0, v / "checkpoint.json", v / "checkpoint", v / "train.json")
        files["train"].append(v / "train.json")
    for name in ("a", "b"):
        q, e = tmp / "drr" / "questions" / name / "eval.jsonl", run / "eval" / name / "seed0"
        stages.generate(
            cfg, q, tmp / "manifest.json", "simulated", 0, cache, e / "generations.jsonl", e / "prompts.jsonl"
        )
        files["scan"].append(e / "prompts.jsonl")
        for method in settings.methods(cfg):
            variant = settings.DM_METHODS.get(method)
            ckpt = run / "dm" / "seed0" / variant / "checkpoint.json" if variant else None
            out = e / "episodes" / f"{method}.jsonl"
            episodes.run(cfg, method, e / "generations.jsonl", q, out, ckpt)
            files["episodes"].append(out)
    leak = tmp / "drr" / "leakcheck.json"
    leakcheck.run(cfg, files["questions"], files["scan"], leak)
    drr_claims = tmp / "drr" / "claims.csv"
    report.summarise(
        cfg,
        files["episodes"],
        files["train"],
        files["questions"],
        leak,
        drr_claims,
        tmp / "drr" / "section.json",
        tmp / "drr" / "loss.png",
    )
    claims_stage.run(
        [], tmp / "results" / "report" / "claims.csv", extra=[drr_claims]
    )  # Holm, as the workflow
    return tmp, effects, files


def test_the_planted_drr_effect_is_recovered_and_no_null_row_is_supported(drr_run):
    tmp, effects, _ = drr_run
    out = rehearse_workflow.check_claims(tmp, effects)
    lines: list[str] = []
    counts = rehearse.report(out, lines.append)
    assert counts["false_supported"] == counts["false_contradicted"] == counts["wrong_sign"] == 0, "\n".join(
        lines
    )
    # every row's engine read from what made its episodes: reasoner, DM and SFT-LoRA all simulated
    assert all(r["engine"] == "simulated" for r, _ in out)
    truth = {(r["claim"], r["dataset"]): t for r, t in out}
    assert truth[("DRR beats CoT on accuracy", "a")] == 0.20 and truth[("DRR beats CoT on FS(3)", "a")] == 0.8
    assert (
        truth[("DRR beats CoT on accuracy", "b")] == 0.0
        and truth[("DRR beats CoT on accuracy", "all")] == 0.10
    )
    assert truth[("real DM beats shuffled-label DM on accuracy", "a")] == 0.20
    assert truth[("self-critique does not beat CoT (CoT minus Self-Critic; Huang et al.)", "a")] == 0.0
    on_a = [(r, t) for r, t in out if r["dataset"] == "a" and t]
    assert len(on_a) == 13 and all(r["verdict"] == "supported" for r, _ in on_a), "\n".join(lines)
    assert all(r["engine"] == "simulated" for r, _ in out) and not any("SFT" in r["claim"] for r, _ in out)


def test_the_simulated_dm_is_labelled_and_the_leak_check_passes(drr_run):
    tmp, _, files = drr_run
    assert json.loads((tmp / "drr" / "leakcheck.json").read_text())["verdict"] == "pass"
    ckpt = json.loads(
        (tmp / "drr" / "m" / "simulated" / "dm" / "seed0" / "weighted" / "checkpoint.json").read_text()
    )
    assert ckpt["simulated"] is True and ckpt["files"][0]["path"].endswith(simulated_dm.FILE)
    planted = json.loads(open(ckpt["files"][0]["path"]).read())  # self-contained, as a trained DM
    assert planted["label"] == "drr" and planted["effects"] == [
        {"label": "drr", "points": 20, "datasets": ["a"]}
    ]
    notes = json.loads((tmp / "drr" / "section.json").read_text())["notes"]
    assert sum("SIMULATED" in n for n in notes) == 3  # one per DM variant
    shuffled = [
        json.loads(line) for line in files["episodes"][-1].parent.joinpath("drr_shuffled.jsonl").open()
    ]
    assert all(e["status"] == "answered" for e in shuffled)  # the simulated DM never abstains


def test_only_a_run_with_the_simulated_dm_has_it_in_its_keys():
    real = settings.load({"models": ["m"], "datasets": ["a"]})
    sim = settings.load(
        {
            "models": ["m"],
            "datasets": ["a"],
            "backend": "simulated",
            "backbone": "s",
            "backbones": {"s": {"source": "simulated"}},
        }
    )
    names = lambda stage, cfg: {p.name for p in settings.stage_files(stage, cfg)}
    for stage in ("train", "infer"):
        assert "simulated_dm.py" in names(stage, sim) and "simulated_dm.py" not in names(stage, real)
    assert settings.stage_key("train", sim) != settings.stage_key("train", {**sim, "backbone": "minilm"})
    assert not any("simulated" in n for stage in settings.ENTRIES for n in names(stage, real))


def test_a_simulated_checkpoint_is_never_judged_with_by_a_real_block_nor_the_reverse(tmp_path):
    """The simulated DM reads the gold; a real run whose checkpoint came from a rehearsal (or a
    rehearsal given a trained checkpoint) fails with one line naming the checkpoint."""
    from retrace.drr import episodes

    real = settings.load({"models": ["m"], "datasets": ["a"]})
    sim = settings.load(
        {
            "models": ["m"],
            "datasets": ["a"],
            "backend": "simulated",
            "backbone": "simulated",
            "backbones": {"simulated": {"source": "simulated"}},
        }
    )
    simulated_ckpt, trained_ckpt = tmp_path / "sim.json", tmp_path / "trained.json"
    simulated_ckpt.write_text(json.dumps({"simulated": True, "folder": str(tmp_path)}))
    trained_ckpt.write_text(json.dumps({"folder": str(tmp_path)}))
    with pytest.raises(ValueError, match="sim.json: a simulated checkpoint, but drr.backbone"):
        episodes._judge(real, simulated_ckpt, {}, [], tmp_path / "g", tmp_path / "p")
    with pytest.raises(ValueError, match="trained.json: a trained checkpoint, but drr.backbone 'simulated'"):
        episodes._judge(sim, trained_ckpt, {}, [], tmp_path / "g", tmp_path / "p")
