"""The tier guard: a check the Ray tier failed during is ``unverified``, whatever the checker made
of the failure; the others keep their verdicts."""

from __future__ import annotations

import pytest

from middleware.checking import SentenceChecker, check_sentence
from middleware.checkers.tier_guard import TierGuardedChecker
from middleware.runtime.ray_client import Endpoint, TierUnavailable
from middleware.types import CheckContext, Mode, Sentence, SentenceReport, Verdict
from tests.support.redis_server import free_port

pytestmark = pytest.mark.timeout(60)


class SwallowingChecker(SentenceChecker):
    """Like the evidence sources: a failed call to the tier is logged away, and the check
    goes on to a verdict on no evidence."""

    def __init__(self, endpoint: Endpoint | None) -> None:
        self.endpoint = endpoint

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        if self.endpoint is not None:
            try:
                await self.endpoint.post({"inputs": [sentence.text]})
            except TierUnavailable:
                pass
        return SentenceReport(index=sentence.index, start=sentence.start, end=sentence.end, text=sentence.text,
                              verdict=Verdict(label="extrapolatory", reason="no evidence"))


async def test_a_check_the_tier_failed_during_is_unverified() -> None:
    sentence = Sentence(index=0, start=0, end=9, text="Sentence.")
    context = CheckContext(mode=Mode.ANNOTATE)
    endpoint = Endpoint(f"http://127.0.0.1:{free_port()}/embed", timeout_s=1.0)
    try:
        touched = await check_sentence(TierGuardedChecker(SwallowingChecker(endpoint)), sentence, context)
    finally:
        await endpoint.aclose()
    assert (touched.verdict.label, touched.verdict.reason) == ("unverified", "error: TierUnavailable")
    untouched = await check_sentence(TierGuardedChecker(SwallowingChecker(None)), sentence, context)
    assert untouched.verdict.label == "extrapolatory"
    summary = await TierGuardedChecker(SwallowingChecker(None)).open(context).summarize([touched, untouched], Mode.ANNOTATE)
    assert summary.verdicts == {"unverified": 1, "extrapolatory": 1}
