"""load_tests/cpu_parity.py: the per-CPU comparison of the shipped int8 models (issue 47)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from load_tests.cpu_parity import DEFAULT_PAIRS, ROOT, load_pairs, main


def test_the_pairs_are_the_clones_own_and_seeded() -> None:
    assert all(path.is_file() and path.is_relative_to(ROOT / "tests") for path in DEFAULT_PAIRS)
    pairs = load_pairs(DEFAULT_PAIRS, 0, 13)
    assert len(pairs) > 500 and len({pid for pid, _, _ in pairs}) == len(pairs)
    sample = load_pairs(DEFAULT_PAIRS, 40, 13)
    assert len(sample) == 40 and sample == load_pairs(DEFAULT_PAIRS, 40, 13) != load_pairs(DEFAULT_PAIRS, 40, 14)
    assert set(sample) <= set(pairs)


def test_a_run_matches_itself_and_a_moved_verdict_is_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, moved = tmp_path / "first.json", tmp_path / "moved.json"
    main(["run", "--out", str(first), "--limit", "6", "--exact-int8", "on"])
    record = json.loads(first.read_text())
    assert len(record["verifier"]["pairs"]) == 6 and len(record["embedder"]) == 6
    assert record["cpu"]["int8_probe_sum"]["exact_switch"] == 255 * 127 * 64
    capsys.readouterr()
    main(["compare", str(first), str(first), "--max-prob-diff", "0"])
    same = json.loads(capsys.readouterr().out.split("\n", 2)[2])
    assert same["max_abs_diff"] == 0 and same["argmax_flips"] == same["verdict_flips"] == 0
    assert same["embedder"]["min_cosine"] > 0.9999

    pid, row = next(iter(record["verifier"]["pairs"].items()))
    row["probs"] = row["probs"][::-1]  # entailment and contradiction swap places
    row["verdict"] = "moved"
    moved.write_text(json.dumps(record))
    with pytest.raises(SystemExit) as failed:
        main(["compare", str(first), str(moved), "--max-prob-diff", "0.01"])
    assert failed.value.code == 1
    found = json.loads(capsys.readouterr().out.split("\n", 2)[2])
    assert found["verdict_flips"] == 1 and found["worst_pair"]["id"] == pid and found["max_abs_diff"] > 0.01
