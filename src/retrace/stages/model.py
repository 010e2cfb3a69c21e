"""Stage `model`: materialise and fingerprint one declared model (config/model/<name>.yaml).

python -m retrace model --model qwen2.5-coder-0.5b-q4km --out results/models/<name>/manifest.json
"""

from __future__ import annotations

from pathlib import Path

from retrace.config.compose import compose
from retrace.planning.plan import config_slice, stage_sources
from retrace.store import models
from retrace.store.provenance import Provenance
from retrace.util.atomic import write_json


def run(model: str, out: Path, overrides: tuple[str, ...] = ()) -> dict:
    cfg = compose({"model": model}, overrides)
    prov = Provenance("model", config_slice("model", cfg), stage_sources("model", cfg))
    manifest, sources = models.materialise(cfg["model"], out.parent)
    prov.inputs = [str(p) for p in sources]
    # The weights are inputs of every job that loads them: audit re-hashes them from here,
    # and each loading job checks them against the manifest (models.load_manifest).
    prov.extra["companions"] = [
        {"path": p, "sha256": d, "kind": "weights"} for p, d in models.weight_files(manifest)
    ]
    prov.extra["model"] = {
        "name": manifest["name"],
        "fingerprint": manifest["fingerprint"],
        "params": manifest["params"],
    }
    write_json(out, manifest)
    models.stamp_weights(manifest, out)  # size and mtime: later loads skip the re-hash
    prov.write(out)
    return manifest
