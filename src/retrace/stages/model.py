"""Stage `model`: materialise and fingerprint one declared model (config/model/<name>.yaml).

python -m retrace model --model qwen2.5-coder-0.5b-q4km --out results/models/<name>/manifest.json
"""

from __future__ import annotations

from pathlib import Path

from retrace import models
from retrace.atomic import write_json
from retrace.config import compose
from retrace.hashing import sha256_file
from retrace.plan import config_slice, stage_sources
from retrace.provenance import Provenance


def run(model: str, out: Path, overrides: tuple[str, ...] = ()) -> dict:
    cfg = compose({"model": model}, overrides)
    prov = Provenance("model", config_slice("model", cfg), stage_sources("model", cfg))
    manifest, sources = models.materialise(cfg["model"], out.parent)
    prov.inputs = [str(p) for p in sources]
    weights = manifest.get("gguf")
    if weights and Path(weights).parent == out.parent:
        # The concatenated weights are a by-product of this stage: audit re-hashes them too.
        prov.extra["companions"] = [{"path": weights, "sha256": sha256_file(weights)}]
    if manifest.get("hf_dir") and weights:  # an HF export of the GGUF (source.hf_export)
        prov.extra.setdefault("companions", []).extend(
            {"path": str(p), "sha256": sha256_file(p)} for p in sorted(Path(manifest["hf_dir"]).iterdir())
        )
    prov.extra["model"] = {
        "name": manifest["name"],
        "fingerprint": manifest["fingerprint"],
        "params": manifest["params"],
    }
    write_json(out, manifest)
    prov.write(out)
    return manifest
