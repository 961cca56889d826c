"""The NLI verifier with a scripted pair scorer: windows packed to the budget, label order from the
model, each pair scored once, two-class models, contradictions only in an aligned window, long
evidence in one batch."""

from __future__ import annotations

import pytest

from middleware.pipeline.verifiers import NLIVerifier, build_windows, passages_from_texts, to_verdict_label
from middleware.types import NLI_LABELS
from tests.support.pipeline_doubles import RulePairScorer, keyword_rule
from tests.middleware.pipeline.verifiers.test_slots_verifier import CURIE


def test_windows_fit_the_budget() -> None:
    long_text = " ".join(f"Sentence number {i} talks about topic {i} at some length here." for i in range(12))
    passages = passages_from_texts([long_text, "Short passage."])
    windows = build_windows(passages, budget=40)
    assert {w.passage_index for w in windows} == {0, 1}
    for w in windows:
        assert passages[w.passage_index].text[w.start : w.end] == w.text
    assert len([w for w in windows if w.passage_index == 0]) > 1
    assert all(len(w.text.split()) < 40 for w in windows)
    # packed: each window starts at the previous one's last sentence, and together they cover the text
    first = [w for w in build_windows(passages, budget=80) if w.passage_index == 0]
    for previous, current in zip(first, first[1:]):
        last_sentence = previous.text.split(". ")[-1]
        assert current.text.startswith(last_sentence.rstrip(".")) and current.end > previous.end
    assert first[0].start == 0 and first[-1].end == len(long_text)
    assert len(first) <= 6  # 12 sentences, 4 per window: not one window per sentence


@pytest.mark.parametrize(
    "labels",
    [
        ("entailment", "neutral", "contradiction"),
        ("contradiction", "entailment", "neutral"),
        ("ENTAILMENT", "NEUTRAL", "CONTRADICTION"),
    ],
)
async def test_nli_label_order_comes_from_the_model(labels: tuple[str, ...]) -> None:
    order = [NLI_LABELS.index(to_verdict_label(name)) for name in labels]

    def rule(premise: str, hypothesis: str) -> list[float]:
        probs = [0.9, 0.07, 0.03] if "Warsaw" in premise else [0.1, 0.8, 0.1]
        return [probs[i] for i in order]

    scorer = RulePairScorer(rule, labels)
    verdict = await NLIVerifier(scorer).verify(
        "Curie was born in Warsaw.", passages_from_texts(["Rome.", CURIE])
    )
    assert verdict.label == "attributable" and verdict.evidence_index == 1
    assert verdict.scores["attributable"] == pytest.approx(0.9)
    assert len(scorer.batches) == 1  # every window in one batch


async def test_nli_scores_each_pair_once() -> None:
    scorer = RulePairScorer(keyword_rule(entail="Warsaw"))
    verifier = NLIVerifier(scorer)
    first = await verifier.verify("Curie was born in Warsaw.", passages_from_texts([CURIE]))
    second = await verifier.verify("Curie was born in Warsaw.", passages_from_texts([CURIE, "Rome is old."]))
    assert first.scores == second.scores and [len(b) for b in scorer.batches] == [1, 1]


async def test_nli_two_class_model() -> None:
    scorer = RulePairScorer(lambda p, h: [0.2, 0.8], ("entailment", "not_entailment"))
    verdict = await NLIVerifier(scorer).verify("Curie was born in Paris.", passages_from_texts([CURIE]))
    assert verdict.label == "extrapolatory"
    assert verdict.scores == pytest.approx({"attributable": 0.2, "extrapolatory": 0.8, "contradictory": 0.0})


async def test_nli_contradiction_needs_an_aligned_window() -> None:
    scorer = RulePairScorer(keyword_rule(contradict="Passy"))
    aligned = await NLIVerifier(scorer).verify(
        "Marie Curie died in 1934 in Paris.", passages_from_texts([CURIE])
    )
    assert aligned.label == "contradictory" and aligned.span == (0, 34)
    unrelated = await NLIVerifier(scorer).verify(
        "Bananas are yellow.", passages_from_texts(["Passy is a district."])
    )
    assert unrelated.label == "extrapolatory"


async def test_nli_long_evidence_windows_in_one_batch() -> None:
    filler = " ".join(f"Filler sentence {i} about nothing in particular at all." for i in range(40))
    text = filler + " Marie Curie was born in Warsaw. " + filler
    scorer = RulePairScorer(keyword_rule(entail="born in Warsaw"), max_length=64)
    verdict = await NLIVerifier(scorer, max_windows=16).verify(
        "Curie was born in Warsaw.", passages_from_texts([text])
    )
    assert verdict.label == "attributable" and "born in Warsaw" in verdict.evidence_sentence
    assert len(scorer.batches) == 1 and len(scorer.batches[0]) == 16
    start, end = verdict.evidence_span
    assert text[start:end] == verdict.evidence_sentence
