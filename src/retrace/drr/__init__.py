"""DRR, Distillation-Reinforcement-Reasoning (issue 4; the DRR paper, titled in retrace/config/paper_numbers.yaml), in the
order the method runs:

    python -m retrace drr questions|distil|split|train|generate|infer|sft|leakcheck|summarise ...
    python -m retrace leakcheck --jsonl FILE          # the leak check on anyone's prompts

- settings: the experiment's `drr:` block over config/drr/defaults.yaml, rerun keys, provenance.
- data: `stages.questions` (DRR-train / evaluation questions).
- distil: `prompts` (Appendix B prompts, templates in prompts/drr/, the one renderer of past
  attempts, reply parsing), `reasoner` (batched rollouts through CachedLLM), `loop`
  (Algorithm 1 and the inference loop as pure functions), `stages.distil`.
- discriminator: `dm_data` (traces -> DM rows, grouped 80/20 split, class weights), `dm` (the
  MiniLM / Flan-T5 classifier, Eq. 1), `stages.split` / `stages.train`.
- reason: `stages.generate` (rejection paths, Abstain, Self-Critic), `episodes` (each method's
  episodes), `sft` (the SFT-LoRA baseline).
- checks: `leak` (what counts as a gold leak), `leakcheck` (the stage, and the rehearsal
  `retrace plan --check` runs on the datasets themselves).
- metrics and report: `metrics` (FS(k), Acc, Acc(D), DM rates), `claims` (paired claims per
  dataset and Overall), `report` (claims.csv, the report section, the loss curve); `cli`.
No module here imports another in a circle (tests/unit/test_drr_package.py).
"""
