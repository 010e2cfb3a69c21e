"""Figure 6 of benchmarks/reliability.py: bad inputs give an error that names the place.

Each case runs the user-facing command on one bad input and holds if the command fails, its
output names the place (file:line, config key, artifact path) and nothing was left under the
output's name (no artifact, no provenance record, no temporary file). The read-only mirror is
the one case that must succeed: the mirror is only ever read.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml
from reliability_kit import OVERRIDES, Checkout, flip_byte

GOOD = {"id": "a", "question": "What is 1+1?", "answer": "2"}
ROWS = {  # name -> (bytes of a smoke_math-format file, the place the error must name)
    "truncated last line": (json.dumps(GOOD) + '\n{"id": "b", "question": "2+2?", "ans', "bad.jsonl:2"),
    "missing gold": (json.dumps(GOOD) + '\n{"id": "b", "question": "2+2?"}\n', "bad.jsonl:2"),
    "wrong type": (json.dumps(GOOD) + '\n{"id": "b", "question": 4, "answer": "4"}\n', "bad.jsonl:2"),
    "duplicate id": (json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n", "bad.jsonl:2"),
    "non-UTF-8": (
        json.dumps(GOOD).encode() + b'\n{"id": "b", "question": "caf\xe9", "answer": "1"}\n',
        "bad.jsonl:2",
    ),
}
OVERRIDE_CASES = {  # name -> (experiment methods, bad override, key the error must name)
    "unknown key": (["greedy"], "method.sampling.temprature=0.3", "temprature"),
    "wrong type": (["greedy"], "method.sampling.max_tokens=many", "method.sampling.max_tokens"),
    "N out of range": (["majority"], "method.n=0", "method.n"),
    "depth out of range": (["refine"], "method.depth=-1", "method.depth"),
    "negative temperature": (["majority"], "method.sampling.temperature=-0.7", "method.sampling.temperature"),
}


@dataclass
class Case:
    name: str
    ok: bool  # held (False for a case that did not run)
    detail: str
    skipped: bool = False  # did not run here (e.g. no root to mount): neither held nor failed


def _left(out: Path) -> list[str]:
    return [p.name for p in out.parent.glob(f"*{out.name}*")] if out.parent.exists() else []


def _refused(name: str, proc: subprocess.CompletedProcess, place: str, out: Path | None) -> Case:
    said = proc.stdout + proc.stderr
    left = _left(out) if out else []
    ok = proc.returncode != 0 and place in said and not left
    last = [line for line in said.strip().splitlines() if place in line][-1:] or said.strip().splitlines()[
        -1:
    ]
    return Case(name, ok, (last[0][-160:] if last else "") + (f" LEFT {left}" if left else ""))


def data_cases(co: Checkout, work: Path) -> list[Case]:
    mirror, cases = work / "bad-mirror", []
    mirror.mkdir(exist_ok=True)
    for name, (content, place) in ROWS.items():
        (mirror / "bad.jsonl").write_bytes(content if isinstance(content, bytes) else content.encode())
        out = co.root / "results/data/bad.jsonl"
        proc = co.retrace(
            "data",
            "--dataset",
            "smoke_math",
            "--mirror",
            str(mirror),
            "--out",
            str(out),
            "--override",
            "dataset.source=mirror",
            "--override",
            "dataset.mirror_path=bad.jsonl",
            "--override",
            "dataset.limit=null",
        )
        cases.append(_refused(f"data: {name}", proc, place, out))
    out = co.root / "results/data/gsm8k.jsonl"
    proc = co.retrace(
        "data", "--dataset", "gsm8k", "--mirror", str(work / "no-such-mirror"), "--out", str(out)
    )
    cases.append(_refused("mirror: missing", proc, "no-such-mirror", out))
    cases.append(read_only_mirror(co, work))
    return cases


def read_only_mirror(co: Checkout, work: Path) -> Case:
    """A mirror on a read-only filesystem is read as usual (root: a tmpfs remounted ro)."""
    ro = work / "ro-mirror"
    ro.mkdir(exist_ok=True)
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(ro)], capture_output=True
    ).returncode:
        return Case("mirror: read-only", False, "skipped (needs root to mount)", skipped=True)
    try:
        (ro / "ok.jsonl").write_text(json.dumps(GOOD) + "\n")
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        out = co.root / "results/data/ro.jsonl"
        proc = co.retrace(
            "data",
            "--dataset",
            "smoke_math",
            "--mirror",
            str(ro),
            "--out",
            str(out),
            "--override",
            "dataset.source=mirror",
            "--override",
            "dataset.mirror_path=ok.jsonl",
        )
        ok = proc.returncode == 0 and out.exists()
        return Case("mirror: read-only", ok, "read as usual" if ok else proc.stderr[-200:])
    finally:
        subprocess.run(["umount", "-l", str(ro)], capture_output=True)


def override_cases(co: Checkout) -> list[Case]:
    cases = []
    exp = yaml.safe_load((co.root / "config/experiment/plumbing.yaml").read_text())
    for name, (methods, bad, place) in OVERRIDE_CASES.items():
        one = {"runs": [{**exp["runs"][0], "datasets": ["smoke_math"], "methods": methods}]}
        (co.root / "config/experiment/bad_input.yaml").write_text(yaml.safe_dump(one))
        co.write_config("bad_input", OVERRIDES + [bad])
        proc = co.snakemake("-n")
        cases.append(_refused(f"override: {name}", proc, place, None))
    co.write_config("plumbing", OVERRIDES)
    return cases


def model_case(co: Checkout, ref_root: Path, work: Path) -> Case:
    """A local model file with one byte changed, its config pinning the true sha256."""
    good = next((ref_root / "results/models").glob("*/model.gguf"))
    bad = work / "tampered.gguf"
    shutil.copyfile(good, bad)
    sha = hashlib.sha256(good.read_bytes()).hexdigest()
    flip_byte(bad)
    cfg = yaml.safe_load((co.root / "config/model/smollm2-135m-q41.yaml").read_text())
    cfg.update(name="tampered", source={"kind": "local", "path": str(bad), "sha256": sha})
    (co.root / "config/model/tampered.yaml").write_text(yaml.safe_dump(cfg))
    out = co.root / "results/models/tampered/manifest.json"
    proc = co.retrace("model", "--model", "tampered", "--out", str(out))
    return _refused("model: one byte changed", proc, str(bad), out)


def provenance_cases(ref_root: Path) -> list[Case]:
    """A provenance record edited (still valid JSON), and one cut short: audit names it."""
    cases = []
    rec = next((ref_root / "results/scores").rglob("*.json.prov.json"))
    rel = str(rec.relative_to(ref_root))
    original = rec.read_bytes()
    edited = json.dumps({**json.loads(original), "stage": "edited by hand"}, indent=2).encode()
    for name, damaged in (("edited", edited), ("truncated", original[: len(original) // 2])):
        rec.write_bytes(damaged)
        try:
            co = Checkout.existing(ref_root)
            proc = co.retrace("audit", "results/report/results.csv")
        finally:
            rec.write_bytes(original)
        cases.append(_refused(f"provenance record: {name}", proc, rel, None))
    return cases


def bad_inputs(work: Path, ref_root: Path) -> list[Case]:
    co = Checkout(work / "bad-inputs")
    return (
        data_cases(co, work)
        + override_cases(co)
        + [model_case(co, ref_root, work)]
        + provenance_cases(ref_root)
    )
