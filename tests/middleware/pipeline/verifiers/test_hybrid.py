"""The hybrid verifier: the slots verifier and a scripted NLI model combined (a slot mismatch
overrides entailment, paraphrases come from the NLI, weak entailment needs the claim's slots,
names and polarity, an NLI contradiction is located by the slots)."""

from __future__ import annotations

import pytest

from middleware.pipeline.verifiers import HybridVerifier, NLIVerifier, passages_from_texts
from tests.support.pipeline_doubles import RulePairScorer, keyword_rule
from tests.middleware.pipeline.verifiers.test_slots_verifier import CURIE, TOWER, _slots_verifier


def _hybrid(rule) -> HybridVerifier:  # noqa: ANN001
    return HybridVerifier(NLIVerifier(RulePairScorer(rule)), _slots_verifier())


async def test_hybrid_number_mismatch_overrides_entailment() -> None:
    verdict = await _hybrid(lambda p, h: [0.85, 0.1, 0.05]).verify(
        "The Eiffel Tower is 300 metres tall.", passages_from_texts([TOWER])
    )
    assert verdict.label == "contradictory" and verdict.backend == "hybrid"
    assert verdict.replacement == "330 metres" and verdict.span == (20, 30)
    assert max(verdict.scores, key=verdict.scores.__getitem__) == "contradictory"


async def test_hybrid_paraphrase_from_nli() -> None:
    evidence = passages_from_texts(["Albert Einstein received the Nobel Prize in Physics in 1921."])
    claim = "Einstein won the Nobel Prize in Physics in 1921."
    assert (await _slots_verifier().verify(claim, evidence)).label == "extrapolatory"
    verdict = await _hybrid(keyword_rule(entail="received")).verify(claim, evidence)
    assert verdict.label == "attributable"


async def test_hybrid_slots_support_when_nli_is_neutral() -> None:
    verdict = await _hybrid(lambda p, h: [0.3, 0.6, 0.1]).verify(
        "Marie Curie was born in Warsaw in 1867.", passages_from_texts([CURIE])
    )
    assert verdict.label == "attributable"


async def test_hybrid_weak_entailment_without_the_date_is_extrapolatory() -> None:
    evidence = passages_from_texts(["Marie Curie was born in Warsaw."])
    claim = "Marie Curie was born in Warsaw in 1867."
    weak = await _hybrid(lambda p, h: [0.7, 0.2, 0.1]).verify(claim, evidence)
    assert weak.label == "extrapolatory" and weak.span == (34, 38)
    strong = await _hybrid(lambda p, h: [0.97, 0.02, 0.01]).verify(claim, evidence)
    assert strong.label == "attributable"


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        ("Einstein received the prize in Stockholm.", "Einstein received the prize."),  # a name
        ("Cruz modelled only for L'Oréal.", "Cruz modelled for Mango and for L'Oréal."),  # exclusivity
    ],
)
async def test_hybrid_weak_entailment_needs_names_and_polarity(claim: str, evidence: str) -> None:
    weak = await _hybrid(lambda p, h: [0.8, 0.15, 0.05]).verify(claim, passages_from_texts([evidence]))
    assert weak.label == "extrapolatory"
    strong = await _hybrid(lambda p, h: [0.96, 0.03, 0.01]).verify(claim, passages_from_texts([evidence]))
    assert strong.label == "attributable"


async def test_hybrid_nli_contradiction_localised_by_slots() -> None:
    evidence = passages_from_texts(["Obama visited Iran in 2010."])
    verdict = await _hybrid(keyword_rule(contradict="Obama")).verify("Obama never visited Iran.", evidence)
    assert verdict.label == "contradictory" and verdict.mismatches[0].kind == "negation"


async def test_hybrid_a_name_mismatch_overrides_strong_entailment() -> None:
    evidence = passages_from_texts(["Newton was knighted by Queen Anne in 1705."])
    verdict = await _hybrid(lambda p, h: [0.95, 0.03, 0.02]).verify("Newton was knighted by Queen Victoria in 1705.", evidence)
    assert verdict.label == "contradictory" and verdict.replacement == "Queen Anne"


async def test_hybrid_an_opposite_verb_overrides_strong_entailment() -> None:
    """The small model entails 'sold Graceland' from 'bought Graceland' (P=0.89)."""
    evidence = passages_from_texts(["In 1957 he bought Graceland, a mansion in Memphis, Tennessee."])
    verdict = await _hybrid(lambda p, h: [0.95, 0.03, 0.02]).verify("In 1957 Elvis Presley sold Graceland, a mansion in Memphis.", evidence)
    assert verdict.label == "contradictory", verdict.reason
    assert (verdict.mismatches[0].kind, verdict.mismatches[0].replacement) == ("relation", "bought")
