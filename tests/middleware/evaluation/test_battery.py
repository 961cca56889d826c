"""The battery evaluation: the word-overlap baseline, per-set metrics and
scoring through the ``Verifier`` interface (test doubles only; no ../shared)."""

from __future__ import annotations

import pytest

from middleware.pipeline.verifiers import DetailedVerdict
from middleware.evaluation import battery
from middleware.training.claim_sets import Item
from middleware.types import Passage, RuleFinding


def test_word_overlap_takes_the_best_item() -> None:
    assert battery.word_overlap("The cat sat", ["the dog sat", "a cat sat the"]) == 1.0
    assert battery.word_overlap("The cat sat", ["the dog"]) == pytest.approx(1 / 3)
    assert battery.word_overlap("", ["x"]) == 0.0 and battery.word_overlap("x", []) == 0.0


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
        Item("a", "fever_symmetric", "Cats purr.", ["Cats purr loudly."], "attributable"),
        Item("b", "fever_symmetric", "Dogs purr.", ["Cats purr."], "contradictory"),
        Item("c", "fever_symmetric", "Owls purr.", ["Cats purr."], "attributable"),
    ]
    scored = await battery.score(_Doubles(), "fever_symmetric", items)
    assert scored.labels == ["attributable", "contradictory", "contradictory"]
    assert scored.rules == [[], ["negation"], ["negation"]]
    metrics = scored.metrics()
    assert metrics["balanced_accuracy"] == 75.0 and metrics["contradiction_precision"] == 50.0
    assert metrics["contradictions_flagged"] == 2 and metrics["n"] == 3
    table = battery.render_table({"fever_symmetric": metrics, "mean": battery.mean_row({"fever_symmetric": metrics}, ["fever_symmetric"])})
    assert "fever_symmetric" in table and "75.0" in table
