"""DRR as workflow stages (issue 4; ../shared/papers/drr.paper.txt).

    python -m retrace drr questions|distil|split|train|generate|infer|sft|leakcheck|summarise ...

- `settings`: the experiment's `drr:` block merged over config/drr/defaults.yaml, rerun keys.
- `prompts`: Appendix B prompts (templates in prompts/drr/) and answer parsing.
- `reasoner`: turn-synchronous batched rollouts of the reasoner through CachedLLM; Algorithm 1
  and the inference loop are the pure functions of retrace.discriminator.loop over them.
- `dm`: the discriminator (MiniLM or Flan-T5 classification head, weighted CE, Eq. 1), its
  inputs fitted to max_length oldest-context-first, on the configured device.
- `sft`: the SFT-LoRA baseline (peft), stage `drr sft` when `sft_lora.enabled`.
- `leakcheck`: the gold-leak check over every stored prompt and DM row (fails the run by default).
- `stages`, `report`: the stage bodies and the claims/report section.
"""
