"""The claims map of a paper experiment: every headline claim of the paper, with its quoted
source, mapped to the claims.csv rows that test it and/or to the register entry that says why
it is not (fully) tested and what would test it.

    retrace deviations --experiment paper --claims    # one `claim:` line per claim

One YAML per experiment in claims/ beside this file: `experiment` and `claims`, each with
    id, claim      a short name and the claim in a sentence;
    quote, source  the paper's words (from the stored text; a clone has no copy) and where;
    rows           claim-row names as claims.csv writes them ([] where none tests it);
    entry          the id of a deviations-register entry (retrace/deviations/<experiment>.yaml):
                   required where `rows` is empty.
Checks (`problems`, run by `retrace deviations --check` and `retrace plan --check`): every row
is a claim name some family writes (retrace.scoring.preregistered.known_claims), every entry exists in
the experiment's register, every claim has a row or an entry. Not covered: whether the map is
complete (a reviewer's job: the issue that asked for it listed the claims).
"""

from __future__ import annotations

from pathlib import Path

import yaml

HERE = Path(__file__).parent / "claims"
KEYS = {"id", "claim", "quote", "source", "rows", "entry"}


def path_of(experiment: str) -> Path:
    return HERE / f"{experiment}.yaml"


def load(experiment: str) -> list[dict]:
    """The claims of `experiment`'s map, checked for shape; an error names the file and claim."""
    path = path_of(experiment)
    if not path.exists():
        raise ValueError(f"no claims map for experiment {experiment!r} ({path} does not exist)")
    claims = (yaml.safe_load(path.read_text()) or {}).get("claims") or []
    for i, c in enumerate(claims):
        if not isinstance(c, dict) or set(c) - KEYS or not {"id", "claim", "quote", "source"} <= set(c):
            raise ValueError(f"{path}: claims[{i}]: keys {sorted(c)}; expected {sorted(KEYS)}")
    return claims


def line(c: dict) -> str:
    """One claim as one line: the claim, its source, its rows, the entry that explains it."""
    rows = "; ".join(c.get("rows") or []) or "none"
    entry = f"; register entry: {c['entry']}" if c.get("entry") else ""
    return f'claim: {c["claim"]} ("{c["quote"]}", {c["source"]}); rows: {rows}{entry}'


def lines(experiment: str) -> list[str]:
    return [line(c) for c in load(experiment)]


def problems(experiment: str, entries: set[str]) -> list[tuple[str, str]]:
    """(file: claim, reason) for each row that no family writes, each entry not in the register
    (`entries`: its ids) and each claim with neither."""
    from retrace.scoring.preregistered import known_claims

    if not path_of(experiment).exists():
        return []
    known, out = known_claims(), []
    for i, c in enumerate(load(experiment)):
        where = f"{path_of(experiment)}: claims[{i}] ({c['id']})"
        out += [
            (f"{where}.rows", f"no claim row {r!r} exists") for r in c.get("rows") or [] if r not in known
        ]
        if c.get("entry") and c["entry"] not in entries:
            out.append((f"{where}.entry", f"no register entry {c['entry']!r} in {experiment}'s register"))
        if not c.get("rows") and not c.get("entry"):
            out.append((where, "neither a row nor a register entry says how it is tested"))
    return out
