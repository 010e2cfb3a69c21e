"""The pilot's reward role on the real hf_reward path: a tiny random model of
Qwen2.5-Math-RM-72B's architecture (tests/unit/test_qwen_rm.py's), loaded as the scorer loads
the hub repo, reading solutions of the role's length."""

from __future__ import annotations

import yaml

from retrace.app import pilot
from retrace.app.pilot_roles import RoleLoad
from retrace.config.compose import CONFIG_DIR
from tests.unit.test_qwen_rm import tiny_qwen_rm  # noqa: F401  (the fixture)


def test_the_reward_role_times_the_reward_model_reading_solutions_of_its_length(tiny_qwen_rm):
    block = yaml.safe_load((CONFIG_DIR / "method" / "best_of_n_qwen_rm.yaml").read_text())["scorer"]
    block = {**block, "path": str(tiny_qwen_rm), "device": "cpu", "dtype": "float32", "device_map": None}
    short = pilot.measure_reward(RoleLoad("reward", 60, 0, block), 3, pilot.Calibration(0.0, 2.0))
    long = pilot.measure_reward(RoleLoad("reward", 240, 0, block), 3, pilot.Calibration(0.0, 2.0))
    assert short["role"] == "reward" and short["requests"] == 3 and short["decode_tok_s"] is None
    assert short["prefill_tok_s"] > 0 and short["model"] == str(tiny_qwen_rm)
    # counted by the reward model's own tokenizer: a longer role reads more tokens a solution
    assert long["context_tokens"] > 2 * short["context_tokens"]
