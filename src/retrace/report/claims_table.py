"""claims.csv (scoring/claims.py `write_claims_csv`) -> rows for the report's Claims section.

    rows = read_claims(Path("results/report/claims.csv"))

CSV cells are text; the numbers come back as floats and ints (None where a cell is empty)
and `evidence` as the list of provenance hashes that `write_claims_csv` joined with ';'.
"""

from __future__ import annotations

import csv
from pathlib import Path

REQUIRED = (
    "claim",
    "model",
    "dataset",
    "method",
    "baseline",
    "delta",
    "ci_low",
    "ci_high",
    "p_value",
    "verdict",
    "evidence",
)
# The multiplicity-adjusted p-value, where claims.csv has one (shown beside the raw one);
# other extra columns are kept as text and ignored by the page.
P_ADJ = "p_adj"
P_ADJ_ALIASES = ("p_adj", "p_value_adj", "p_adjusted", "p_holm")
FLOATS = ("delta", "ci_low", "ci_high", "p_value", "acc_method", "acc_baseline")
INTS = ("n_questions", "wins", "ties", "losses")


def _number(cell: str | None, kind: type) -> float | int | None:
    return None if cell is None or cell.strip() == "" else kind(float(cell))


def claim_display_row(raw: dict) -> dict:
    """One CSV row with its numbers parsed and its evidence split."""
    row = dict(raw)
    row.update({k: _number(raw.get(k), float) for k in FLOATS})
    row.update({k: _number(raw.get(k), int) for k in INTS})
    row["evidence"] = [h for h in (raw.get("evidence") or "").split(";") if h]
    adj = next((raw[k] for k in P_ADJ_ALIASES if (raw.get(k) or "").strip()), None)
    row[P_ADJ] = _number(adj, float)
    return row


def read_claims(path: Path) -> list[dict]:
    """Every row of a claims CSV, in file order; a missing column is an error naming the file."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path}: claims CSV lacks columns {missing}")
        return [claim_display_row(r) for r in reader]
