"""Where the papers' reported numbers are kept: paper_numbers.yaml, beside this module.

The report (retrace.report.paper) reads and checks them; `retrace plan --check` checks the
deviations register's references against them (retrace.deviations, retrace.planning.preflight).
They sit in the config layer because both read them (docs/development/architecture.md).
"""

from __future__ import annotations

from pathlib import Path

NUMBERS = Path(__file__).with_name("paper_numbers.yaml")
