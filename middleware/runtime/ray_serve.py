"""The runtime's models as Ray Serve deployments: the tier every proxy replica shares
(``runtime.backend: ray``; ``ray_client`` is the proxies' side, ``ray_tier`` deploys these).

Each deployment wraps the in-process model class the local runtime uses (``OnnxEmbedder``,
``OnnxPairScorer``, ``OnnxSeq2Seq``, loaded by ``middleware.runtime.loading`` from the tier's
own settings), behind an HTTP route of the Serve ingress (``ray_client.ROUTES``): ``GET`` describes
the model (and counts the requests and batches served), ``POST {"inputs": [...]}`` runs it. Requests from every replica are batched together
by ``@serve.batch`` (dynamic batching, sized as the in-process batcher is on the device the
replica's model runs on, ``encoder.batch_limits``: ``runtime.max_batch`` / ``max_wait_ms`` on
the CPU, ``runtime.cuda_max_batch`` / ``cuda_max_wait_ms`` on CUDA), and each batch runs in one
length-sorted pass of the model's blocking path (``embed_sync``, ``score_sync``,
``generate_fused``) in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnxruntime as ort
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from middleware.runtime.encoder import BatchLimits, batch_limits
from middleware.runtime.loading import load_embedder, load_pair_scorer, load_seq2seq
from middleware.runtime.onnx_session import CUDA
from middleware.runtime.precision import Device
from middleware.runtime.ray_client import encode_rows
from middleware.settings import RuntimeSettings


def split(rows: np.ndarray | list[Any], sizes: Sequence[int]) -> list[Any]:
    """Cut the rows of a batch back into the requests they came from."""
    out, start = [], 0
    for size in sizes:
        out.append(rows[start : start + size])
        start += size
    return out


class _Served:
    """What the deployments share: the model, its description, the batch limits."""

    def _setup(self, kind: str, spec: str, settings_json: str) -> RuntimeSettings:
        settings = RuntimeSettings.model_validate_json(settings_json).model_copy(update={"backend": "local"})
        self.kind, self.spec = kind, spec
        self.info: dict[str, Any] = {"kind": kind, "spec": spec}
        self.served = {"requests": 0, "batches": 0}
        return settings

    def _limit_batches(self, settings: RuntimeSettings, device: Device) -> None:
        """Size ``self.batch`` (the subclass's ``@serve.batch``) for the device the model runs on."""
        limits = batch_limits(settings, device)
        self.batch.set_max_batch_size(limits.max_batch)  # type: ignore[attr-defined]
        self.batch.set_batch_wait_timeout_s(limits.max_wait_ms / 1000.0)  # type: ignore[attr-defined]
        self.info.update(device=device, max_batch=limits.max_batch, max_wait_ms=limits.max_wait_ms)

    def _count(self, requests: int) -> None:
        self.served["requests"] += requests
        self.served["batches"] += 1

    async def _describe_or_run(self, request: Request) -> JSONResponse:
        if request.method == "GET":
            return JSONResponse({**self.info, "served": self.served})
        body = await request.json()
        inputs = body.get("inputs") if isinstance(body, dict) else None
        if not isinstance(inputs, list):
            return JSONResponse({"error": "expected {\"inputs\": [...]}"}, status_code=400)
        return JSONResponse(await self._run(inputs, body))

    async def _run(self, inputs: list[Any], body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


@serve.deployment
class EncoderModel(_Served):
    """An embedder (``embed``) or a cross-encoder (``nli``, ``rerank``): rows of float32."""

    def __init__(self, kind: str, spec: str, settings_json: str) -> None:
        settings = self._setup(kind, spec, settings_json)
        if kind == "embed":
            model: Any = load_embedder(settings)
            self.infer_sync = model.embed_sync
            self.info.update(name=model.name, dim=model.dim)
        else:
            model = load_pair_scorer(spec, kind, settings)
            self.infer_sync = lambda pairs: model.score_sync([tuple(pair) for pair in pairs])
            self.info.update(name=model.name, labels=model.labels, manifest=model.manifest.model_dump(mode="json"))
        self._limit_batches(settings, model.session.device)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.002)
    async def batch(self, requests: list[list[Any]]) -> list[np.ndarray]:
        self._count(len(requests))
        flat = [item for request in requests for item in request]
        rows = await asyncio.to_thread(self.infer_sync, flat)
        return split(rows, [len(request) for request in requests])

    async def _run(self, inputs: list[Any], body: dict[str, Any]) -> dict[str, Any]:
        return encode_rows(await self.batch(inputs))

    async def __call__(self, request: Request) -> JSONResponse:
        return await self._describe_or_run(request)


@serve.deployment
class Seq2SeqModel(_Served):
    """A seq2seq model: each input a group of texts, encoded apart and decoded together
    (fusion-in-decoder; a group of one is plain generation)."""

    def __init__(self, kind: str, spec: str, settings_json: str) -> None:
        settings = self._setup(kind, spec, settings_json)
        self.model = load_seq2seq(spec, settings)
        self.info.update(name=f"seq2seq:{self.model.directory.name}")
        self._limit_batches(settings, self.model.encoder.device)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.002)
    async def batch(self, requests: list[tuple[list[list[str]], int]]) -> list[list[str]]:
        """Requests asking for the same ``max_new_tokens`` are decoded in one pass."""
        self._count(len(requests))
        outputs: list[list[str]] = [[] for _ in requests]
        for max_new in sorted({max_new for _, max_new in requests}):
            chosen = [i for i, (_, m) in enumerate(requests) if m == max_new]
            groups = [group for i in chosen for group in requests[i][0]]
            texts = await asyncio.to_thread(self.model.generate_fused, groups, max_new)
            for i, part in zip(chosen, split(texts, [len(requests[i][0]) for i in chosen]), strict=True):
                outputs[i] = list(part)
        return outputs

    async def _run(self, inputs: list[Any], body: dict[str, Any]) -> dict[str, Any]:
        groups = [[str(text) for text in group] for group in inputs]
        return {"outputs": await self.batch((groups, int(body.get("max_new_tokens", 64))))}

    async def __call__(self, request: Request) -> JSONResponse:
        return await self._describe_or_run(request)


def model_specs(runtime: RuntimeSettings, seq2seq_model: str | None) -> dict[str, str]:
    """The models a tier serves for these settings: the embedder and the NLI model always, the
    relevance cross-encoder and the seq2seq model when configured. Kind -> spec."""
    specs = {"embed": runtime.embed_model, "nli": runtime.nli_model}
    if runtime.rerank_model:
        specs["rerank"] = runtime.rerank_model
    if seq2seq_model:
        specs["seq2seq"] = seq2seq_model
    return specs


def replica_device(runtime: RuntimeSettings) -> Device:
    """The device the replicas will run on: ``runtime.provider``, and for ``auto`` CUDA where
    this node's onnxruntime offers it (a replica checks CUDA itself when it loads)."""
    if runtime.provider == "auto":
        return "cuda" if CUDA in ort.get_available_providers() else "cpu"
    return runtime.provider


def replica_limits(runtime: RuntimeSettings) -> BatchLimits:
    """The batch limits the replicas will take (``encoder.batch_limits`` on ``replica_device``)."""
    return batch_limits(runtime, replica_device(runtime))


def application(kind: str, spec: str, runtime: RuntimeSettings) -> Any:
    """The Serve application of one model: ``runtime.ray_replicas`` replicas of
    ``runtime.ray_replica_cpus`` CPUs each, taking enough requests at once to fill a batch."""
    deployment = Seq2SeqModel if kind == "seq2seq" else EncoderModel
    options = deployment.options(
        name=f"{kind}-model",
        num_replicas=runtime.ray_replicas,
        ray_actor_options={"num_cpus": runtime.ray_replica_cpus},
        max_ongoing_requests=max(8, 4 * replica_limits(runtime).max_batch),
    )
    return options.bind(kind, spec, runtime.model_dump_json())
