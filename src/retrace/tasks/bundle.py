"""The small data sets shipped inside retrace (`src/retrace/tasks/bundled/`), and their MANIFEST.

The default run must work from a clone alone, with no benchmark mirror beside it, so the
data it reads ships with the package: two sets written for retrace (smoke_math, smoke_mc)
and seeded subsets of public benchmarks (never whole data sets). Each file's source,
licence and sha256 are recorded in `bundled/MANIFEST.yaml`.

Rebuild the subsets from a mirror and rewrite the MANIFEST:

    python -m retrace.tasks.bundle --mirror ../shared/data

Check that the files match the MANIFEST (a test does this too):

    python -m retrace.tasks.bundle --check

A subset is `SUBSET_SIZE` examples drawn with `random.Random(SEED)` from the task's
`examples` list and kept in file order; every other field of the task.json (its canary
string included) is copied unchanged, so the bundled file reads like the original.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

from retrace.util.yamlfile import load_yaml

BUNDLED = Path(__file__).resolve().parent / "bundled"
MANIFEST = BUNDLED / "MANIFEST.yaml"
SUBSET_SIZE = 24  # ART's smoke draws 3 held-out + 2 test items; 24 leaves room for its overlap filter
SEED = 0
BIGBENCH_ORIGIN = "PyPI bigbench==1.0.0 (sdist) bigbench/benchmark_tasks/{task}/task.json"
# BIG-bench tasks the default run reads (config/dataset/smoke_bigbench_*.yaml).
BIGBENCH_SUBSETS = ("arithmetic/2_digit_multiplication", "hindu_knowledge", "word_unscrambling")
WRITTEN = {
    "smoke_math.jsonl": "20 easy maths word problems written for retrace",
    "smoke_mc.jsonl": "20 four-way general-knowledge questions written for retrace",
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bigbench_subset(mirror: Path, task: str) -> tuple[dict, int]:
    """(the subset task.json, the full example count) of one BIG-bench task in the mirror."""
    data = json.loads((mirror / "bigbench" / task / "task.json").read_text(encoding="utf-8"))
    examples = data["examples"]
    keep = sorted(random.Random(SEED).sample(range(len(examples)), min(SUBSET_SIZE, len(examples))))
    return {**data, "examples": [examples[i] for i in keep]}, len(examples)


def build(mirror: Path) -> dict:
    """Write the BIG-bench subsets from `mirror`; return the MANIFEST mapping (all files)."""
    files = {
        name: {"source": what, "licence": "Apache-2.0 (retrace)", "sha256": sha256(BUNDLED / name)}
        for name, what in WRITTEN.items()
    }
    for task in BIGBENCH_SUBSETS:
        subset, total = bigbench_subset(mirror, task)
        rel = f"bigbench/{task}/task.json"
        out = BUNDLED / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(subset, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        files[rel] = {
            "source": BIGBENCH_ORIGIN.format(task=task),
            "source_sha256": sha256(mirror / "bigbench" / task / "task.json"),
            "subset": f"{len(subset['examples'])} of {total} examples, random.Random({SEED}).sample, file order",
            "licence": "Apache-2.0 (BIG-bench)",
            "sha256": sha256(out),
        }
    return files


def write_manifest(files: dict) -> None:
    import yaml

    head = (
        "# Written by `python -m retrace.tasks.bundle --mirror DIR`; checked by tests/unit/test_bundled.py.\n"
    )
    MANIFEST.write_text(head + yaml.safe_dump(files, sort_keys=True, width=110))


def check() -> list[str]:
    """Problems found: a bundled file missing from the MANIFEST, absent, or with another sha256."""
    listed = load_yaml(MANIFEST) or {}
    present = {
        str(p.relative_to(BUNDLED)) for p in BUNDLED.rglob("*") if p.is_file() and p.name != MANIFEST.name
    }
    problems = [f"{rel}: not in {MANIFEST.name}" for rel in sorted(present - set(listed))]
    for rel, entry in sorted(listed.items()):
        path = BUNDLED / rel
        if not path.is_file():
            problems.append(f"{rel}: listed in {MANIFEST.name} but absent")
        elif sha256(path) != entry["sha256"]:
            problems.append(f"{rel}: sha256 {sha256(path)} differs from {MANIFEST.name}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m retrace.tasks.bundle",
        description="Rebuild retrace's bundled data subsets, or check them against their MANIFEST.",
        epilog="examples:\n  python -m retrace.tasks.bundle --mirror ../shared/data\n"
        "  python -m retrace.tasks.bundle --check",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--mirror", type=Path, help="benchmark mirror to draw the subsets from")
    group.add_argument("--check", action="store_true", help="compare the files with the MANIFEST")
    a = ap.parse_args(argv)
    if a.check:
        problems = check()
        print("\n".join(problems) or f"{MANIFEST}: every bundled file matches")
        return 1 if problems else 0
    write_manifest(build(a.mirror))
    print(f"wrote {MANIFEST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
