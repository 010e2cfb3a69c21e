"""SIGTERM and SIGINT end a job the way an exception does, so its cleanup runs.

    with stopping():   # retrace.cli.main wraps every command in this
        run_the_job()

`scancel`, a SLURM time limit (SIGTERM, then SIGKILL after KillWait) and Ctrl-C raise Stopped
in the main thread: `finally` blocks and context managers run (the request cache's locks are
released, engines closed; every batch published before stays in the cache), then the process
ends by the same signal with the default action, so its exit status is the conventional one
(143 for SIGTERM, 130 for SIGINT) and Snakemake/SLURM see a killed job, not a failed one.
What this does not cover: SIGKILL (nothing runs; the cache's record locks die with the process,
retrace.store.cache_lock) and a signal arriving while C code holds the GIL for long (handled when it
returns).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from contextlib import contextmanager

log = logging.getLogger(__name__)
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(BaseException):  # not an Exception: `except Exception` must not swallow it
    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def _raise(signum, frame) -> None:
    raise Stopped(signum)


@contextmanager
def stopping():
    """Turn SIGTERM/SIGINT into Stopped inside the block; at its end, die by that signal."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, _raise) for s in SIGNALS}
    try:
        yield
    except Stopped as e:
        log.warning("%s: cleaned up; what was published to the request cache is kept", e)
        for s, h in before.items():
            signal.signal(s, h)
        signal.signal(e.signum, signal.SIG_DFL)
        os.kill(os.getpid(), e.signum)
        raise  # only reached if the default action does not end the process
    finally:
        for s, h in before.items():
            signal.signal(s, h)
