"""Progress lines in job logs (tqdm), and `retrace status`: running jobs read from their logs.

    with progress("generate", total=len(requests), unit="requests") as bar:
        ...; bar.advance(done=len(batch), tokens=generated)

writes, on stderr (the job's log under Snakemake), lines such as

    progress generate: 48/128 requests [00:41<01:08, 212.4 tok/s]

done/total, elapsed<ETA and the throughput in generated tokens per second. On a terminal
tqdm redraws one line; into a file each refresh becomes its own line (at most one per
`RETRACE_PROGRESS_SECONDS`, default 15), so a log stays readable and `status` can parse
the last one. `status(log_dir)` lists the logs whose last progress line is unfinished and
which changed recently (a killed job's log stops changing; it is shown as stale).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

# Searched anywhere in a line, not only at its start: an engine may write to the same stderr
# without a newline (llama.cpp's log text), so the progress line can arrive glued to its tail.
LINE = re.compile(
    r"progress (?P<label>[^:]+): (?P<done>\d+)/(?P<total>\d+) (?P<unit>\S+) "
    r"\[(?P<elapsed>[^<]*)<(?P<eta>[^,\]]*)(?:, (?P<rate>[\d.]+) tok/s)?\]"
)
BAR_FORMAT = "progress {desc}: {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}{postfix}]"


class _Lines:
    """A stream for tqdm that turns its carriage-return redraws into separate lines."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, text: str) -> None:
        for part in re.split(r"[\r\n]+", text):
            if part.strip():
                self.stream.write(part.rstrip() + "\n")

    def flush(self) -> None:
        self.stream.flush()


class Bar:
    """A tqdm bar that also counts generated tokens for the tok/s figure."""

    def __init__(self, bar):
        self.bar, self.tokens, self.start = bar, 0, time.monotonic()

    def advance(self, done: int = 1, tokens: int = 0) -> None:
        self.tokens += tokens
        if self.tokens:
            rate = self.tokens / max(time.monotonic() - self.start, 1e-9)
            self.bar.set_postfix_str(f"{rate:.1f} tok/s", refresh=False)
        self.bar.update(done)


@contextmanager
def progress(label: str, total: int, unit: str = "requests", stream: TextIO | None = None) -> Iterator[Bar]:
    """A progress bar on `stream` (stderr); line-per-refresh when it is not a terminal."""
    from tqdm import tqdm

    stream = stream or sys.stderr
    tty = hasattr(stream, "isatty") and stream.isatty()
    interval = float(os.environ.get("RETRACE_PROGRESS_SECONDS", "15"))
    bar = tqdm(
        total=total,
        desc=label,
        unit=unit,
        bar_format=BAR_FORMAT,
        file=stream if tty else _Lines(stream),
        mininterval=0.5 if tty else interval,
        maxinterval=max(interval, 10.0),
        dynamic_ncols=tty,
        ascii=True,
    )
    try:
        yield Bar(bar)
    finally:
        bar.close()


def last_progress(log: Path) -> dict | None:
    """The last progress line of a log, parsed; None when it has none."""
    found = None
    with open(log, errors="replace") as f:
        for line in f:
            m = LINE.search(line.strip())
            if m:
                found = m.groupdict()
    return found


def status(log_dir: Path, stale_after: float = 600.0, now: float | None = None) -> list[dict]:
    """Logs under log_dir whose last progress line is unfinished: one row each, newest first."""
    now = time.time() if now is None else now
    rows = []
    for log in sorted(Path(log_dir).rglob("*.log")):
        p = last_progress(log)
        if p is None or int(p["done"]) >= int(p["total"]):
            continue
        age = now - log.stat().st_mtime
        rows.append({"log": str(log), **p, "age_s": round(age), "stale": age > stale_after})
    return sorted(rows, key=lambda r: r["age_s"])


def format_status(rows: list[dict]) -> str:
    """A plain-text table for `retrace status`."""
    if not rows:
        return "no running jobs (no unfinished progress line in the logs)"
    lines = []
    for r in rows:
        pct = 100 * int(r["done"]) / max(1, int(r["total"]))
        rate = f"{r['rate']} tok/s" if r.get("rate") else "- tok/s"
        state = f"STALE, last line {r['age_s']} s ago" if r["stale"] else f"updated {r['age_s']} s ago"
        lines.append(
            f"{r['log']}: {r['label']} {r['done']}/{r['total']} {r['unit']} ({pct:.0f}%), "
            f"{rate}, ETA {r['eta'].strip() or '?'}; {state}"
        )
    return "\n".join(lines)
