"""The experiment file's pre-registered claims block, read and checked:

    claims:
      primary: {claims: [claim, ...], datasets: [...], alpha: 0.04}   # primary_family
      weaker: [[weak model, strong model], ...]                       # weaker_pairs
      controls: true                                                  # controls_flag

Read by the claims stage (retrace.stages.claims) and by the design simulation
(retrace.scoring.design); kept in the analysis layer so both reach it without an upward
import (docs/development/architecture.md).
"""

from __future__ import annotations

from retrace.scoring.claims import ALPHA, CONTROL_CLAIMS, PAPER_CLAIMS, Primary


def _claims_block(experiment: dict, name: str) -> dict:
    block = experiment.get("claims") or {}
    unknown = set(block) - {"weaker", "primary", "controls"}
    if unknown:
        raise ValueError(
            f"{name}: claims: unknown key(s) {sorted(unknown)}; valid: controls, primary, weaker"
        )
    return block


def primary_family(experiment: dict, name: str = "experiment") -> Primary | None:
    """The experiment file's pre-registered primary claims, checked:
    `claims: {primary: {claims: [claim, ...], datasets: [...], alpha: 0.04}}` (datasets
    optional: every dataset); None without."""
    block = _claims_block(experiment, name).get("primary")
    if not block:
        return None
    claims, alpha = block.get("claims"), block.get("alpha")
    known = known_claims()
    if set(block) - {"claims", "datasets", "alpha"} or not claims or not isinstance(alpha, float):
        raise ValueError(
            f"{name}: claims.primary wants {{claims: [claim, ...], datasets: [...], alpha: 0.04}}, got {block!r}"
        )
    if not 0 < alpha < ALPHA:
        raise ValueError(f"{name}: claims.primary.alpha must lie in (0, {ALPHA:g}), got {alpha}")
    unknown = [c for c in claims if c not in known]
    if unknown:
        raise ValueError(f"{name}: claims.primary names unknown claim(s) {unknown}; known: {sorted(known)}")
    return Primary(tuple(claims), alpha, tuple(block.get("datasets") or ()))


def known_claims() -> set[str]:
    """Every claim an experiment's claims.primary may name: the spine's (PAPER_CLAIMS, the
    weaker-model row, CONTROL_CLAIMS) and each method family's own (DRR, ART: retrace.config.families
    `claim_names`), whose rows reach claims.csv through the family's claims CSV and are
    adjusted in the same families."""
    from retrace.config.families import FAMILIES

    spine = {c[0] for c in PAPER_CLAIMS + CONTROL_CLAIMS} | {"weaker models gain most"}
    return spine.union(*(f.claim_names() for f in FAMILIES.all()))


def weaker_pairs(experiment: dict, name: str = "experiment") -> list[tuple[str, str]]:
    """The experiment file's `claims: {weaker: [[weak, strong], ...]}`, checked."""
    block = _claims_block(experiment, name)
    pairs = []
    for i, pair in enumerate(block.get("weaker") or []):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(m, str) for m in pair)):
            raise ValueError(f"{name}: claims.weaker[{i}] must be [weak model, strong model], got {pair!r}")
        pairs.append(tuple(pair))
    return pairs


def controls_flag(experiment: dict, name: str = "experiment") -> bool:
    """The experiment file's `claims: {controls: true}`: add the CONTROL_CLAIMS rows."""
    from retrace.config.experiment import schema_default

    value = (experiment.get("claims") or {}).get("controls")
    value = schema_default("claims", "controls") if value is None else value
    if not isinstance(value, bool):
        raise ValueError(f"{name}: claims.controls must be true or false, got {value!r}")
    return value
