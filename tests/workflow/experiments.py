"""The experiments of the shared workflow runs (tests/workflow/conftest.py), written into each
copy as config/experiment/<name>.yaml. Test files import their constants from here."""

from __future__ import annotations

from pathlib import Path

import yaml

# --- refine_test: the refinement suite on smoke_math_mini (fixture `refined`) -----------------
SHORT = "method.sampling.max_tokens=24"
JUDGE = "qwen2.5-coder-0.5b-q4km"
SMALL = [SHORT, "method.n=2"]
REFINE_TEST = {
    "runs": [
        {
            "models": ["smollm2-135m-q40"],
            "backend": "llamacpp",
            "datasets": ["smoke_math_mini"],
            "seeds": [0],
            "methods": [
                {"label": "greedy", "overrides": [SHORT]},
                {"label": "majority", "overrides": SMALL},
                {"label": "refine", "overrides": SMALL + ["method.depth=1"]},
                {
                    "label": "refine_affirm",
                    "method": "refine",
                    "overrides": SMALL + ["method.depth=1", "method.critic=affirm"],
                },
                {
                    "label": "refine_nocritic",
                    "method": "refine",
                    "overrides": SMALL + ["method.depth=1", "method.critic=none"],
                },
                {
                    "label": "majority_eq",
                    "method": "majority",
                    "overrides": SMALL,
                    "equal_compute": {"refine": "refine", "majority": "majority", "kind": "effective"},
                },
                {
                    "label": "majority_eq_nominal",
                    "method": "majority",
                    "overrides": SMALL,
                    "equal_compute": {"refine": "refine", "majority": "majority", "kind": "nominal"},
                },
                {"label": "best_of_n", "overrides": SMALL},
                # the judge on another model than the policy: its engine is loaded beside SmolLM2
                {
                    "label": "best_of_n_qwen",
                    "method": "best_of_n",
                    "overrides": SMALL + [f"method.scorer.model={JUDGE}"],
                },
                {"label": "beam", "overrides": [SHORT, "method.max_steps=2", "method.expand=1"]},
            ],
        },
        # two more seeds of refinement and Maj@N: the claims compare seed means (mean ± sd)
        {
            "models": ["smollm2-135m-q40"],
            "backend": "llamacpp",
            "datasets": ["smoke_math_mini"],
            "seeds": [1, 2],
            "methods": [
                {"label": "majority", "overrides": SMALL},
                {"label": "refine", "overrides": SMALL + ["method.depth=1"]},
            ],
        },
    ]
}

# --- drr_test: DRR on smoke_mc_all with the MiniLM discriminator (fixture `drr_run`) ----------
DRR_TEST = {
    "runs": [
        {
            "models": ["smollm2-135m-q40"],
            "backend": "llamacpp",
            "datasets": ["smoke_math_mini"],
            "methods": [{"label": "greedy", "overrides": ["method.sampling.max_tokens=4"]}],
            "seeds": [0],
        }
    ],
    "drr": {
        "models": ["smollm2-135m-q40"],
        "backend": "llamacpp",
        "datasets": ["smoke_mc_all"],
        "train_fraction": 0.6,
        "backbone": "minilm",
        "max_turns_distil": 2,
        "max_turns_infer": 2,
        "max_tokens": 16,
        "dm": {
            "lr": 1.0e-4,
            "warmup_steps": 0,
            "epochs": 1,
            "batch_size": 8,
            "max_length": 128,
            # one thread each: a training here is ~3 s of imports and a second of steps, so
            # the three (weighted, unweighted, shuffled) run side by side on 2 cores
            "threads": 1,
        },
    },
}

# The shared runs' llama.cpp engines on one thread each (the rules' `threads` follow, so
# Snakemake runs two generation jobs at once): `make test-slow` runs them beside three other
# pytest processes, and llama.cpp's threads spin at every barrier of a forward pass, so on 2
# cores two-thread engines side by side burn much of their CPU waiting for each other
# (docs/testing.md). The DRR block takes no overrides: its reasoner keeps two threads.
ONE_THREAD = "backend.engine.n_threads=1"

# --- art_plumbing with a word list of the copy (fixture `art_run`) ----------------------------
WORDS = "wordlist.txt"  # the run's word list: a file of the copy, so a test can edit it


def write_experiment(root: Path, name: str, experiment: dict) -> None:
    (root / "config" / "experiment" / f"{name}.yaml").write_text(yaml.safe_dump(experiment))


def art_words(root: Path) -> None:
    """art_plumbing's lookup tool reads WORDS, a file of the copy."""
    (root / WORDS).write_text("the\ncat\nact\ndog\ngod\nwater\nlisten\nsilent\n")
    exp = root / "config/experiment/art_plumbing.yaml"
    exp.write_text(exp.read_text().replace("tools: {", f"tools: {{lookup: {{words: {WORDS}}}, "))


def one_thread_art(root: Path) -> None:
    """The ART block's engines on one thread, like the spine's (ONE_THREAD)."""
    exp = root / "config/experiment/art_plumbing.yaml"
    cfg = yaml.safe_load(exp.read_text())
    cfg["art"]["overrides"] = [*cfg["art"].get("overrides", []), ONE_THREAD]
    exp.write_text(yaml.safe_dump(cfg))
