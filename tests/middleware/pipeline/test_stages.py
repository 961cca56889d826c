"""The pipeline's stages (``middleware.pipeline.stages``): a claim prepared, its questions
generated and its verdict given, timed, with spans mapped back to the sentence."""

from __future__ import annotations

from middleware.pipeline.checkworthy import assess
from middleware.pipeline.cqgen import SlotQuestionGenerator
from middleware.pipeline.decontext import NoDecontextualiser, SpacyDecontextualiser
from middleware.pipeline.stages import Claim, generate_questions, prepare_claim, verify_claim
from middleware.pipeline.verifiers import passages_from_texts
from middleware.types import CheckContext
from tests.middleware.pipeline.verifiers.test_slots_verifier import CURIE, _slots_verifier


async def test_stages_time_and_map_back() -> None:
    timings: dict[str, float] = {}
    context = CheckContext(previous=["Marie Curie was a physicist."])
    claim = await prepare_claim("She was born in Warsaw.", context, SpacyDecontextualiser(), timings)
    assert claim.text == "Marie Curie was born in Warsaw." and claim.worthiness.checkworthy
    questions = await generate_questions(SlotQuestionGenerator(), claim, timings=timings)
    where = next(q for q in questions if q.slot == "Warsaw")
    assert claim.sentence[where.span[0] : where.span[1]] == "Warsaw"
    assert set(timings) == {"claims", "questions"}
    skipped = await prepare_claim("Hello there!", context, NoDecontextualiser())
    assert not skipped.worthiness.checkworthy and skipped.text == "Hello there!"


async def test_verify_claim_maps_spans_to_the_sentence() -> None:
    sentence = "She was born in Paris."
    decontext = SpacyDecontextualiser().resolve(sentence, ["Marie Curie was a physicist."])
    claim = Claim(sentence, assess(sentence), decontext)
    timings: dict[str, float] = {}
    verdict = await verify_claim(_slots_verifier(), claim, passages_from_texts([CURIE]), timings=timings)
    assert verdict.label == "contradictory" and sentence[verdict.span[0] : verdict.span[1]] == "Paris"
    assert verdict.mismatches[0].text == "Paris" and "verify" in timings
