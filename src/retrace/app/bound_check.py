"""Every finished generation job against its bound: calls, prompt tokens, generated tokens.

    retrace rehearse --experiment paper     # prints `bound violations: N` after the workflow
    violations(labels, Path("results"))     # labels: `retrace plan --estimate --json`'s "labels"

A label's bound (retrace.planning.sizing, `--json`'s `labels`: `calls`, `prompt_tokens`,
`generated_tokens`) is what its job may spend; its provenance (results/generations/<job>.jsonl
.prov.json, `usage`: every completion the method used, cached or not) is what it spent. A
sharded label is compared as merged (the shards' usage summed). A label without a finished
generation is not compared (a rehearsal runs every label; a partial run compares what it has).
"""

from __future__ import annotations

import json
from pathlib import Path

CHECKED = (
    ("calls", "requests"),
    ("prompt_tokens", "prompt_tokens_all"),
    ("generated_tokens", "generated_tokens_all"),
)


def violations(labels: list[dict], results: Path) -> tuple[int, list[str]]:
    """(labels compared, one line per count over its bound)."""
    compared, out = 0, []
    for label in labels:
        usage = _usage(results / "generations" / f"{label['job']}.jsonl.prov.json")
        if usage is None or not label.get("size_known", True):
            continue
        compared += 1
        for bound_key, usage_key in CHECKED:
            spent, bound = int(usage.get(usage_key, 0)), int(label[bound_key])
            if spent > bound:
                out.append(f"{label['job']}: {bound_key.replace('_', ' ')} {spent:,} > its bound {bound:,}")
    return compared, out


def _usage(prov: Path) -> dict | None:
    try:
        return json.loads(prov.read_text()).get("usage")
    except (OSError, ValueError, AttributeError):
        return None


def line(compared: int, found: list[str]) -> str:
    head = f"bound violations: {len(found)} (calls, prompt and generated tokens of {compared} labels)"
    return "\n".join([head, *(f"  {x}" for x in found)])
