"""Test-time reasoning methods; one file per method, registered in METHODS by name.

Every method has one signature: `run(problems, cfg, llm, ctx) -> list[row]`, where `cfg`
is its resolved `config/method/<name>.yaml`, `llm` a retrace.engine.llm.CachedLLM and `ctx` a
MethodContext. Variants (an always-affirm critic, a larger N) are configuration, not forks.
"""
