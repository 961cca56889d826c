"""The Ray tier's client without a cluster: the wire form of the rows, and a proxy whose tier never
answers."""

from __future__ import annotations

import numpy as np
import pytest

from middleware.composition import build_checker
from middleware.composition.backends import BackendUnavailable
from middleware.runtime import load_embedder, load_seq2seq
from middleware.checkers.tier_guard import TierGuardedChecker
from middleware.runtime.ray_client import TierUnavailable, decode_rows, encode_rows
from middleware.settings import load_settings
from tests.support.redis_server import free_port

pytestmark = pytest.mark.timeout(60)


def test_rows_cross_the_wire_exactly() -> None:
    rows = np.random.default_rng(0).normal(size=(5, 7)).astype(np.float32)
    back = decode_rows(encode_rows(rows))
    assert back.dtype == np.float32 and np.array_equal(back, rows)
    assert decode_rows(encode_rows(np.zeros((0, 3)))).shape == (0, 3)


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
