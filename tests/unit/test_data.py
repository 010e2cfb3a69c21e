"""retrace.store.data: prepare, subsetting, fingerprints and the problems file."""

import json

import pytest

from retrace.store.data import fingerprint, prepare, read_problems, subset, write_problems
from retrace.util.records import Problem

# What every config/dataset/*.yaml states (no default in code: retrace.config.settings)
ALL = {"limit": None, "subset_seed": 0}
SMOKE = {
    "name": "smoke_math",
    "task": "smoke_math",
    "source": "bundled",
    "bundled_path": "smoke_math.jsonl",
    **ALL,
}


def problems(n):
    return [Problem(id=str(i), question=f"q{i}", gold=str(i)) for i in range(n)]


def test_prepare_bundled_smoke_sets():
    ps, files = prepare(SMOKE, None)
    assert len(ps) == 20 and files[0].name == "smoke_math.jsonl"
    assert all(p.gold.isdigit() for p in ps)
    mc, _ = prepare({"task": "smoke_mc", "source": "bundled", "bundled_path": "smoke_mc.jsonl", **ALL}, None)
    assert len(mc) == 20 and all(len(p.choices) == 4 and p.gold in "ABCD" for p in mc)


def test_subset_is_deterministic_ordered_and_seed_sensitive():
    ps = problems(100)
    a, b = subset(ps, 10, seed=0), subset(ps, 10, seed=0)
    assert a == b and len(a) == 10
    assert [int(p.id) for p in a] == sorted(int(p.id) for p in a)
    assert subset(ps, 10, seed=1) != a


def test_subset_limit_none_or_large_keeps_all():
    ps = problems(5)
    assert subset(ps, None) == ps and subset(ps, 50) == ps
    with pytest.raises(ValueError):
        subset(ps, -1)


def test_prepare_applies_limit_and_seed():
    ps, _ = prepare(dict(SMOKE, limit=5, subset_seed=3), None)
    again, _ = prepare(dict(SMOKE, limit=5, subset_seed=3), None)
    assert len(ps) == 5 and ps == again


def test_duplicate_ids_are_refused(tmp_path):
    row = {"id": "same", "question": "1+1?", "answer": "2"}
    (tmp_path / "dup.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    cfg = {"task": "smoke_math", "source": "mirror", "mirror_path": "dup.jsonl"}
    with pytest.raises(
        ValueError, match=r"mirror:dup.jsonl:2: duplicate problem id .*first at mirror:dup.jsonl:1"
    ):
        prepare(cfg, tmp_path)


GOOD = json.dumps({"id": "a", "question": "1+1?", "answer": "2"}) + "\n"


@pytest.mark.parametrize(
    "second_line, message",
    [
        (b'{"id": "b", "question": "2+2?", "ans', r"bad.jsonl:2: malformed JSON line"),  # truncated
        (b'{"id": "b", "question": "2+2?"}\n', r"bad.jsonl:2: missing 'answer'"),
        (b'{"id": "b", "question": 4, "answer": "4"}\n', r"bad.jsonl:2: question is int 4, expected text"),
        (
            b'{"id": "b", "question": "caf\xe9?", "answer": "4"}\n',
            r"bad.jsonl:2: not UTF-8 \(byte 0xe9 at column 29\)",
        ),
        (b'["b", "2+2?", "4"]\n', r"bad.jsonl:2: expected a JSON object"),
    ],
    ids=["truncated", "missing-gold", "wrong-type", "not-utf8", "not-an-object"],
)
def test_a_malformed_row_is_refused_naming_file_and_line(tmp_path, second_line, message):
    (tmp_path / "bad.jsonl").write_bytes(GOOD.encode() + second_line)
    cfg = {"task": "smoke_math", "source": "mirror", "mirror_path": "bad.jsonl"}
    with pytest.raises(ValueError, match=message):
        prepare(cfg, tmp_path)


def test_a_row_the_task_cannot_read_is_refused_naming_file_and_line(tmp_path):
    # smoke_mc calls tuple() on choices: an int there is a TypeError inside the task plugin.
    row = {"id": "a", "question": "?", "choices": 3, "answer": "A"}
    (tmp_path / "mc.jsonl").write_text(json.dumps(row) + "\n")
    cfg = {"task": "smoke_mc", "source": "mirror", "mirror_path": "mc.jsonl"}
    with pytest.raises(ValueError, match=r"mc.jsonl:1: malformed row \(TypeError"):
        prepare(cfg, tmp_path)


def test_fingerprint_tracks_content_and_round_trip(tmp_path):
    ps = problems(3)
    assert fingerprint(ps) == fingerprint(list(ps))
    changed = ps[:2] + [Problem(id="2", question="q2", gold="changed")]
    assert fingerprint(changed) != fingerprint(ps)
    write_problems(tmp_path / "p.jsonl", ps)
    assert read_problems(tmp_path / "p.jsonl") == ps


def test_fingerprint_does_not_depend_on_mirror_location(tmp_path):
    rows = [{"question": "q", "answer": "#### 3"}]
    for d in ("m1", "m2"):
        (tmp_path / d / "gsm8k").mkdir(parents=True)
        (tmp_path / d / "gsm8k/test.jsonl").write_text(json.dumps(rows[0]) + "\n")
    cfg = {"task": "gsm8k", "source": "mirror", "mirror_path": "gsm8k/test.jsonl", **ALL}
    assert fingerprint(prepare(cfg, tmp_path / "m1")[0]) == fingerprint(prepare(cfg, tmp_path / "m2")[0])


def test_the_data_stage_counts_skipped_lines_in_its_provenance(tmp_path):
    """OpenBookQA train (DRR's distillation set) leaves out its malformed line 3334; the
    stage's record says how many lines and which."""

    from retrace.stages import data as stage
    from tests.prerequisites import mirror as the_mirror
    from tests.prerequisites import missing

    mirror = the_mirror()
    if not (mirror / "openbookqa" / "train.tsv").is_file():
        missing("MIRROR", f"no openbookqa/train.tsv in the mirror at {mirror}")
    out = tmp_path / "openbookqa_train.jsonl"
    assert stage.run("openbookqa_train", str(mirror), out) == 4956
    record = json.loads(out.with_name(out.name + ".prov.json").read_text())
    assert record["data"]["skipped"] == {"count": 1, "lines": [3334]}
