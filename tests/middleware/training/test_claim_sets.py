"""The readers of the third-party sets: the WiCE and FEVER-Symmetric loaders, the battery's labels
and splits, the seeded sample (files written here; no ../shared)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from middleware.training import claim_sets
from middleware.training.claim_sets import load_fever_symmetric, load_wice


def _write_battery(root: Path) -> None:
    (root / "dev-battery").mkdir(parents=True)
    for name in claim_sets.BATTERY_SETS:
        with (root / "dev-battery" / f"{name}.jsonl").open("w") as handle:
            for i in range(30):
                row = {
                    "id": f"{name}-q{i % 6}-{i}", "dataset": name, "group": f"q{i % 6}",
                    "split": "test" if i % 3 == 0 else "train", "claim": f"Claim {i} about cats.",
                    "evidence": [f"Cats {i}.", ""], "label": "supported" if i % 2 else "unsupported",
                }  # fmt: skip
                handle.write(json.dumps(row) + "\n")

def test_load_set_maps_labels_and_drops_empty_evidence(tmp_path: Path) -> None:
    _write_battery(tmp_path)
    items = claim_sets.load_set(tmp_path, "expertqa")
    assert len(items) == 30 and items[1].gold == "attributable" and items[0].gold == "extrapolatory"
    assert all(i.evidence == [i.evidence[0]] for i in items)
    with pytest.raises(ValueError, match="unknown set"):
        claim_sets.load_set(tmp_path, "nope")

def test_sample_is_seeded_in_file_order_and_keeps_the_split(tmp_path: Path) -> None:
    _write_battery(tmp_path)
    items = claim_sets.load_set(tmp_path, "summedits")
    first = claim_sets.sample(items, "test", 4, seed=1)
    assert first == claim_sets.sample(items, "test", 4, seed=1) and len(first) == 4
    assert all(i.split == "test" for i in first)
    assert [items.index(i) for i in first] == sorted(items.index(i) for i in first)
    assert claim_sets.sample(items, "test", 4, seed=2) != first
    assert len(claim_sets.sample(items, "test", None)) == 10


def test_loaders(tmp_path) -> None:  # noqa: ANN001
    fever = tmp_path / "fever.jsonl"
    fever.write_text(
        json.dumps({"claim": "Cruz modelled .", "evidence": "Cruz -LRB- born 1974 -RRB- modelled .", "label": "SUPPORTS"})
        + "\n"
    )
    (example,) = load_fever_symmetric(tmp_path)
    assert example.claim == "Cruz modelled." and example.evidence == ["Cruz (born 1974) modelled."]
    assert example.gold == "attributable"
    wice = tmp_path / "wice.jsonl"
    wice.write_text(
        json.dumps({"claim": "c", "evidence": [f"s{i}" for i in range(6)], "label": "partially_supported"}) + "\n"
    )
    (example,) = load_wice(wice)
    assert example.evidence == ["s0\ns1\ns2\ns3", "s4\ns5"] and example.gold == "extrapolatory"
