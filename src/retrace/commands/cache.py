"""Maintaining the request cache: `retrace cache compact`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from retrace.commands import command


@command(
    "cache",
    "maintain the request cache (compact: fold each index shard's log into its sorted base)",
    (
        "retrace cache compact                               # results/cache/requests",
        "retrace cache compact --cache /shared/retrace-cache # a cache shared between checkouts",
    ),
)
def _cache(p: argparse.ArgumentParser) -> Callable:
    p.add_argument(
        "action", choices=["compact"], help="compact: rewrite the index shards sorted (safe while jobs run)"
    )
    p.add_argument("--cache", type=Path, default=Path("results/cache/requests"), help="the cache folder")

    def run(a: argparse.Namespace) -> int:
        from retrace.store.cache import RequestCache

        if not a.cache.is_dir():
            raise ValueError(f"no request cache at {a.cache} (--cache names its folder)")
        n = RequestCache(a.cache, job="compact").compact()
        print(f"{a.cache}: index compacted, {n} entries")
        return 0

    return run
