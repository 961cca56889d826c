"""The hybrid verifier's learned decision: the combiner's arithmetic, the decision it makes,
the rules a verdict records and the rules settings switch off."""

from __future__ import annotations

import math

import pytest

from middleware.pipeline.alignment import Aligner
from middleware.composition.backends import build_verifier
from middleware.pipeline.verifiers import HybridVerifier, NLIVerifier, SlotsVerifier, passages_from_texts
from middleware.pipeline.verifiers.combiner import Combiner
from middleware.pipeline.verifiers.features import FEATURES
from middleware.pipeline.verifiers.slots_verifier import RULES
from middleware.settings import load_settings
from onnx_models.manifest import CombinerWeights, LinearModel, Tree, TreeEnsemble
from tests.support.pipeline_doubles import HashingEmbedder, RulePairScorer

TOWER = "The Eiffel Tower is 330 metres tall and was completed in 1889."


def _stump(feature: str, threshold: float, low: float, high: float) -> Tree:
    """One question: ``low`` where the feature is at most ``threshold``, else ``high``."""
    return Tree(feature=[feature, None, None], threshold=[threshold, 0.0, 0.0], left=[1, -1, -1], right=[2, -1, -1],
                value=[0.0, low, high])  # fmt: skip


def _weights(attr: list[Tree], contra: list[Tree], **cuts: float) -> CombinerWeights:
    return CombinerWeights(
        features=sorted({f for t in attr + contra for f in t.feature if f}),
        attributable=TreeEnsemble(init=0.0, trees=attr), contradictory=TreeEnsemble(init=-1.0, trees=contra),
        attributable_threshold=cuts.get("attributable", 0.5), contradictory_threshold=cuts.get("contradictory", 0.9),
        edit_threshold=cuts.get("edit", 0.8), fitted_on="test",
    )  # fmt: skip


def test_combiner_walks_its_trees() -> None:
    combiner = Combiner(_weights([_stump("a", 1.0, -1.0, 2.0), _stump("b", 0.0, 0.5, -0.5)], [_stump("a", 1.0, 0.0, 3.0)]))
    assert combiner.p_attributable({"a": 3.0, "b": 1.0}) == pytest.approx(1 / (1 + math.exp(-(2.0 - 0.5))))
    assert combiner.p_attributable({"a": 1.0, "b": -1.0}) == pytest.approx(1 / (1 + math.exp(-(-1.0 + 0.5))))
    assert combiner.p_contradictory({"a": 2.0}) == pytest.approx(1 / (1 + math.exp(-2.0)))
    # a feature the reading lacks reads 0 (a rule that did not fire)
    assert combiner.p_attributable({}) == pytest.approx(1 / (1 + math.exp(-(-1.0 + 0.5))))


def test_combiner_weighs_a_linear_model() -> None:
    weights = _weights([], [_stump("a", 1.0, 0.0, 3.0)]).model_copy(
        update={"attributable": LinearModel(intercept=-0.5, coefficients={"a": 2.0, "b": -1.0})}
    )
    combiner = Combiner(weights)
    assert combiner.p_attributable({"a": 1.0, "b": 0.5}) == pytest.approx(1 / (1 + math.exp(-(-0.5 + 2.0 - 0.5))))
    assert combiner.p_attributable({}) == pytest.approx(1 / (1 + math.exp(0.5)))  # a missing feature reads 0
    # the manifest reads both kinds back
    assert CombinerWeights.model_validate(weights.model_dump()).attributable == weights.attributable


def _hybrid(combiner: Combiner | None, probs: list[float]) -> HybridVerifier:
    return HybridVerifier(NLIVerifier(RulePairScorer(lambda p, h: probs)), SlotsVerifier(Aligner(HashingEmbedder())), combiner=combiner)


async def test_learned_decision_follows_the_thresholds_not_the_hand_cut_offs() -> None:
    claim, evidence = "The Eiffel Tower is 330 metres tall.", passages_from_texts([TOWER])
    # NLI confident and slots agree: the hand cut-offs say attributable
    assert (await _hybrid(None, [0.9, 0.05, 0.05]).verify(claim, evidence)).label == "attributable"
    # a combiner that reads only the focus entailment, with a threshold above it: not attributable
    strict = Combiner(_weights([_stump("focus_entail", 0.0, -1.0, 1.0)], [_stump("focus_contra", 0.0, 0.0, 1.0)], attributable=0.99))
    verdict = await _hybrid(strict, [0.9, 0.05, 0.05]).verify(claim, evidence)
    assert verdict.label == "extrapolatory" and "P(attributable)=" in (verdict.reason or "")
    assert verdict.scores["attributable"] == pytest.approx(1 / (1 + math.exp(-1.0)), abs=1e-3)  # focus_entail logit(0.9) > 0
    lenient = Combiner(_weights([_stump("focus_entail", 0.0, -1.0, 1.0)], [_stump("focus_contra", 0.0, 0.0, 1.0)], attributable=0.5))
    assert (await _hybrid(lenient, [0.9, 0.05, 0.05]).verify(claim, evidence)).label == "attributable"


async def test_learned_contradiction_keeps_the_slots_mismatch_for_editing() -> None:
    claim, evidence = "The Eiffel Tower is 300 metres tall.", passages_from_texts([TOWER])
    combiner = Combiner(_weights([_stump("focus_entail", 0.0, -1.0, 1.0)], [_stump("rule:value_in_event", 0.5, -5.0, 10.0)], contradictory=0.9))
    verdict = await _hybrid(combiner, [0.85, 0.1, 0.05]).verify(claim, evidence)
    assert verdict.label == "contradictory" and verdict.replacement == "330 metres"
    assert [r.name for r in verdict.rules] == ["value_in_event"] and verdict.rules[0].span == (20, 30)


async def test_a_disabled_rule_does_not_fire_and_unknown_names_are_refused() -> None:
    claim, evidence = "The Eiffel Tower is 300 metres tall.", passages_from_texts([TOWER])
    on = await SlotsVerifier(Aligner(HashingEmbedder())).verify(claim, evidence)
    off = await SlotsVerifier(Aligner(HashingEmbedder()), disabled=["value_in_event", "value_in_same_words"]).verify(claim, evidence)
    assert on.label == "contradictory" and off.label != "contradictory" and not off.mismatches
    assert "value_in_event" not in [r.name for r in off.rules]
    with pytest.raises(ValueError, match="unknown verifier rule"):
        SlotsVerifier(disabled=["no_such_rule"])


def test_settings_reach_the_verifier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FACTCHECK_PIPELINE__RULES__DISABLED", '["negation", "role_swap"]')
    monkeypatch.setenv("FACTCHECK_PIPELINE__RULES__DECISION", "hand")
    settings = load_settings()
    verifier = build_verifier(settings, "hybrid", embedder=HashingEmbedder(), scorer=RulePairScorer(lambda p, h: [0.3, 0.4, 0.3]))
    assert isinstance(verifier, HybridVerifier) and verifier.combiner is None
    assert verifier.slots.disabled == {"negation", "role_swap"}


async def test_every_feature_is_read_and_rules_are_named_features() -> None:
    reading = await _hybrid(None, [0.6, 0.3, 0.1]).read("The Eiffel Tower is 300 metres tall.", passages_from_texts([TOWER]))
    assert set(FEATURES) <= set(reading.features)
    assert all(math.isfinite(v) for v in reading.features.values())
    assert reading.features["rule:value_in_event"] == 1.0 and set(RULES) >= {"value_in_event"}


async def test_a_located_contradiction_stands_unless_the_combiner_finds_support() -> None:
    claim, evidence = "The Eiffel Tower is 300 metres tall.", passages_from_texts([TOWER])
    never = [_stump("focus_contra", 100.0, -5.0, -5.0)]  # P(contradictory) ~ 0: only the rules can say it
    unsure = Combiner(_weights([_stump("focus_entail", 100.0, -1.0, -1.0)], never, attributable=0.5))
    verdict = await _hybrid(unsure, [0.85, 0.1, 0.05]).verify(claim, evidence)
    assert verdict.label == "contradictory" and verdict.replacement == "330 metres"
    convinced = Combiner(_weights([_stump("focus_entail", 100.0, 3.0, 3.0)], never, attributable=0.5))
    assert (await _hybrid(convinced, [0.85, 0.1, 0.05]).verify(claim, evidence)).label == "attributable"


def test_the_pruned_rules_are_off_by_default_only_under_the_learned_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    from middleware.settings import PRUNED_RULES

    combiner = Combiner(_weights([_stump("focus_entail", 0.0, -1.0, 1.0)], [_stump("focus_contra", 0.0, 0.0, 1.0)]))
    settings = load_settings()
    learned = build_verifier(settings, "hybrid", embedder=HashingEmbedder(), scorer=RulePairScorer(lambda p, h: [0.3, 0.4, 0.3]))
    assert isinstance(learned, HybridVerifier)
    from middleware.composition.backends import with_rules

    learned.combiner = combiner
    assert with_rules(learned, settings).slots.disabled == frozenset(PRUNED_RULES)
    learned.combiner = None  # a model without a learned decision keeps every rule its hand cut-offs were tuned with
    assert with_rules(learned, settings).slots.disabled == frozenset()
    monkeypatch.setenv("FACTCHECK_PIPELINE__RULES__DISABLED", "[]")
    learned.combiner = combiner
    assert with_rules(learned, load_settings()).slots.disabled == frozenset()


async def test_a_field_the_claim_states_the_opposite_of_stands_where_the_combiner_finds_support() -> None:
    from middleware.evidence.request_passages import readable

    evidence = passages_from_texts([readable('{"name": "Finch & Fork", "attributes": {"OutdoorSeating": false}}')])
    lenient = Combiner(_weights([_stump("focus_entail", 0.0, -1.0, 1.0)], [_stump("focus_contra", 0.0, 0.0, 1.0)], attributable=0.5))
    # the NLI model reads "Outdoor Seating: no" as support (P 0.94 with the bundled model)
    verdict = await _hybrid(lenient, [0.94, 0.02, 0.04]).verify("The restaurant offers outdoor seating.", evidence)
    assert verdict.label == "contradictory" and [r.name for r in verdict.rules] == ["field_polarity"]
    assert verdict.evidence_sentence == "Outdoor Seating: no"


async def test_an_exchange_of_roles_stands_where_the_combiner_finds_support() -> None:
    """The NLI model reads the swapped Apollo crew as support (same names, same verbs): the
    role_exchange contradiction stands against the learned decision, as field_polarity does."""
    evidence = passages_from_texts([
        "The lunar module Eagle landed on 20 July 1969, carrying Neil Armstrong and Buzz Aldrin, while Michael "
        "Collins remained in lunar orbit. Armstrong became the first person to walk on the Moon, followed by Aldrin."
    ])  # fmt: skip
    claim = "Neil Armstrong became the first person to walk on the Moon, followed by Michael Collins, while Buzz Aldrin remained in lunar orbit."
    lenient = Combiner(_weights([_stump("focus_entail", 0.0, -1.0, 1.0)], [_stump("focus_contra", 0.0, 0.0, 1.0)], attributable=0.5))
    verdict = await _hybrid(lenient, [0.94, 0.02, 0.04]).verify(claim, evidence)
    assert verdict.label == "contradictory" and "role_exchange" in [r.name for r in verdict.rules]
    assert verdict.mismatches and verdict.mismatches[0].kind == "role"


TOWER_RECORD = "- name: Eiffel Tower; height: 330 metres; completed: 1889; city: Paris"


async def test_against_records_attributable_comes_from_the_record_cut_off() -> None:
    """P(attributable) = sigmoid(1) = 0.73: under the combiner's 0.8, above the records' 0.6."""
    claim = "The Eiffel Tower is 330 metres tall."
    weights = _weights([_stump("focus_entail", 0.0, -1.0, 1.0)], [_stump("focus_contra", 0.0, 0.0, 1.0)], attributable=0.8)
    verifier = _hybrid(Combiner(weights.model_copy(update={"record_threshold": 0.6})), [0.9, 0.05, 0.05])
    prose, record = passages_from_texts([TOWER]), passages_from_texts([TOWER_RECORD])
    assert (await verifier.verify(claim, prose)).label == "extrapolatory"
    verdict = await verifier.verify(claim, record)
    assert verdict.label == "attributable" and "a record's cut-off 0.60" in (verdict.reason or "")
    # the setting's cut-off wins over the manifest's
    verifier.record_threshold = 0.75
    assert (await verifier.verify(claim, record)).label == "extrapolatory"
    # without a fitted one, the combiner's own stands against records too
    unfitted = _hybrid(Combiner(weights), [0.9, 0.05, 0.05])
    assert (await unfitted.verify(claim, record)).label == "extrapolatory"


async def test_against_records_a_located_contradiction_keeps_the_combiners_veto() -> None:
    """A slots rule's located contradiction stands below the combiner's cut-off, wherever the records' lies."""
    claim = "The Eiffel Tower is 300 metres tall."
    weights = _weights([_stump("focus_entail", 0.0, -1.0, 1.0)], [_stump("focus_contra", 0.0, -5.0, -5.0)], attributable=0.8)
    verifier = _hybrid(Combiner(weights.model_copy(update={"record_threshold": 0.3})), [0.9, 0.05, 0.05])
    assert (await verifier.verify(claim, passages_from_texts([TOWER, TOWER_RECORD]))).label == "contradictory"


def test_the_record_cut_off_follows_the_setting() -> None:
    scorer = RulePairScorer(lambda p, h: [0.9, 0.05, 0.05])
    settings = load_settings(**{"pipeline.rules.record_threshold": 0.25})
    verifier = build_verifier(settings, "hybrid", embedder=HashingEmbedder(), scorer=scorer)
    assert isinstance(verifier, HybridVerifier) and verifier.record_threshold == 0.25
    assert build_verifier(load_settings(), "hybrid", embedder=HashingEmbedder(), scorer=scorer).record_threshold is None
