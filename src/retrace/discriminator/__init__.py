"""DRR's discriminative model (DM), model-free parts (drr.paper.txt, Sections 3.1–3.3, App. A).

- `loop`: Algorithm 1 (distillation: stop at the first correct answer or max_turns) and the
  inference loop (stop when the judge accepts, abstain after max_turns), over injected
  reasoner/judge callables.
- `dataset`: distillation traces → DM rows (question, past context, answer, rationale →
  Accept/Reject), Reject downsampling, the 80/20 split grouped by question id, class weights
  (w_accept = 3 · w_reject) and the shuffled-label falsifier.
- `leak`: the gold-leak check every stored prompt and DM row must pass.

Training the DM (MiniLM / Flan-T5 backbone) and the stages that call these live elsewhere.
"""
