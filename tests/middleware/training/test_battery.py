"""The battery evaluation: sampling, the word-overlap baseline, AUC, per-set metrics and
scoring through the ``Verifier`` interface (test doubles only; no ../shared)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from middleware.pipeline.verifiers import DetailedVerdict
from middleware.training import battery
from middleware.types import Passage, RuleFinding


def _write_battery(root: Path) -> None:
    (root / "dev-battery").mkdir(parents=True)
    for name in battery.BATTERY_SETS:
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
    items = battery.load_set(tmp_path, "expertqa")
    assert len(items) == 30 and items[1].gold == "attributable" and items[0].gold == "extrapolatory"
    assert all(i.evidence == [i.evidence[0]] for i in items)
    with pytest.raises(ValueError, match="unknown set"):
        battery.load_set(tmp_path, "nope")


def test_sample_is_seeded_in_file_order_and_keeps_the_split(tmp_path: Path) -> None:
    _write_battery(tmp_path)
    items = battery.load_set(tmp_path, "summedits")
    first = battery.sample(items, "test", 4, seed=1)
    assert first == battery.sample(items, "test", 4, seed=1) and len(first) == 4
    assert all(i.split == "test" for i in first)
    assert [items.index(i) for i in first] == sorted(items.index(i) for i in first)
    assert battery.sample(items, "test", 4, seed=2) != first
    assert len(battery.sample(items, "test", None)) == 10


def test_word_overlap_takes_the_best_item() -> None:
    assert battery.word_overlap("The cat sat", ["the dog sat", "a cat sat the"]) == 1.0
    assert battery.word_overlap("The cat sat", ["the dog"]) == pytest.approx(1 / 3)
    assert battery.word_overlap("", ["x"]) == 0.0 and battery.word_overlap("x", []) == 0.0


def test_roc_auc_matches_the_pairwise_definition() -> None:
    rng = random.Random(3)
    gold = [rng.random() < 0.4 for _ in range(60)]
    scores = [round(rng.random(), 1) for _ in range(60)]  # with ties
    pos = [s for s, g in zip(scores, gold, strict=True) if g]
    neg = [s for s, g in zip(scores, gold, strict=True) if not g]
    pairs = [(p > n) + 0.5 * (p == n) for p in pos for n in neg]
    assert battery.roc_auc(gold, scores) == pytest.approx(np.mean(pairs))
    assert np.isnan(battery.roc_auc([True, True], [0.1, 0.2]))


class _Doubles:
    """A verifier double: attributable where the evidence repeats the claim's first word."""

    name = "double"

    async def verify(self, claim: str, evidence: list[Passage], context: str | None = None) -> DetailedVerdict:
        hit = any(claim.split()[0].lower() in p.text.lower() for p in evidence)
        label = "attributable" if hit else "contradictory"
        rules = [RuleFinding(name="negation")] if not hit else []
        return DetailedVerdict(label=label, scores={"attributable": float(hit), "extrapolatory": 0.0, "contradictory": float(not hit)}, rules=rules)


async def test_score_and_metrics_per_set() -> None:
    items = [
        battery.Item("a", "fever_symmetric", "Cats purr.", ["Cats purr loudly."], "attributable"),
        battery.Item("b", "fever_symmetric", "Dogs purr.", ["Cats purr."], "contradictory"),
        battery.Item("c", "fever_symmetric", "Owls purr.", ["Cats purr."], "attributable"),
    ]
    scored = await battery.score(_Doubles(), "fever_symmetric", items)
    assert scored.labels == ["attributable", "contradictory", "contradictory"]
    assert scored.rules == [[], ["negation"], ["negation"]]
    metrics = scored.metrics()
    assert metrics["balanced_accuracy"] == 75.0 and metrics["contradiction_precision"] == 50.0
    assert metrics["contradictions_flagged"] == 2 and metrics["n"] == 3
    table = battery.render_table({"fever_symmetric": metrics, "mean": battery.mean_row({"fever_symmetric": metrics}, ["fever_symmetric"])})
    assert "fever_symmetric" in table and "75.0" in table
