"""The runtime's models served by the Ray Serve tier (``runtime.backend: ray``), seen from a
proxy: the same interfaces as the in-process models (``Embedder``, ``PairScorer``, the seq2seq
``generate``/``generate_fused``), each call one HTTP request to the tier's ingress at
``runtime.ray_serve_url`` (``middleware.runtime.ray_serve`` holds the deployments, which batch
the calls of every replica together). The proxy itself never joins the Ray cluster: it needs no
Ray, and a replica is as stateless as with the local runtime.

A model's description (``GET``: name, dimension, labels, manifest) is read once, when the client
is built, waiting up to ``runtime.ray_startup_s`` for the tier to answer. After that a call that
fails (the tier down, a deployment failing, no answer within ``runtime.ray_timeout_s``) raises
:class:`TierUnavailable`; the check it belongs to becomes ``unverified`` (``middleware.checking``)
and the stream goes on.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import aiohttp
import numpy as np

from middleware.settings import RuntimeSettings
from onnx_models.manifest import Manifest

log = logging.getLogger(__name__)

ROUTES = {"embed": "/embed", "nli": "/nli", "rerank": "/rerank", "seq2seq": "/seq2seq"}
"""Route prefix of each model kind's Serve application on the ingress."""


class TierUnavailable(RuntimeError):
    """The Ray Serve tier did not answer a call, or answered it with an error."""


class _Failures:
    """Calls to the tier that failed in this process (``tier_failures``)."""

    count = 0


def _failed(message: str) -> TierUnavailable:
    _Failures.count += 1
    return TierUnavailable(message)


def tier_failures() -> int:
    """How many calls to the tier have failed in this process so far."""
    return _Failures.count


def encode_rows(rows: np.ndarray) -> dict[str, Any]:
    """A float32 matrix as JSON: its shape and its bytes in base64 (exact, and compact)."""
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    return {"shape": list(rows.shape), "data": base64.b64encode(rows.tobytes()).decode("ascii")}


def decode_rows(payload: dict[str, Any]) -> np.ndarray:
    shape = tuple(int(n) for n in payload["shape"])
    return np.frombuffer(base64.b64decode(payload["data"]), dtype=np.float32).reshape(shape).copy()


class Endpoint:
    """One model's route on the tier, called from coroutines (one HTTP session per event loop)
    or from worker threads (``post_sync``, for the seq2seq models the pipeline runs in threads)."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            for old in [old for old in self._sessions if old.is_closed()]:
                del self._sessions[old]
            session = self._sessions[loop] = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        return session

    async def post(self, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            async with self._session().post(self.url, json=payload) as response:
                body = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise _failed(f"{self.url}: {type(exc).__name__}: {exc}") from exc
        return _answer(self.url, status, body)

    def post_sync(self, payload: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(self.url, data=json.dumps(payload).encode(),
                                         headers={"Content-Type": "application/json"})
        return self._open(request)

    def get_sync(self) -> dict[str, Any]:
        return self._open(urllib.request.Request(self.url))

    def _open(self, request: urllib.request.Request) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310 - configured URL
                return _answer(self.url, response.status, response.read())
        except urllib.error.HTTPError as exc:
            return _answer(self.url, exc.code, exc.read())
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise _failed(f"{self.url}: {type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        """Close the session of the running loop."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()


def _answer(url: str, status: int, body: bytes) -> dict[str, Any]:
    if status != 200:
        raise _failed(f"{url}: HTTP {status}: {body[:200]!r}")
    try:
        answer = json.loads(body)
    except ValueError as exc:
        raise _failed(f"{url}: the tier's answer is not JSON") from exc
    if not isinstance(answer, dict):
        raise _failed(f"{url}: the tier's answer is not a JSON object")
    return answer


def describe(endpoint: Endpoint, kind: str, spec: str, startup_s: float) -> dict[str, Any]:
    """The served model's description, once the tier answers (waiting up to ``startup_s``);
    refuses a tier that serves another model than ``spec``."""
    deadline = time.monotonic() + startup_s
    while True:
        try:
            info = endpoint.get_sync()
            break
        except TierUnavailable as exc:
            if time.monotonic() >= deadline:
                raise TierUnavailable(f"the Ray Serve tier gave no description of its {kind} model within "
                                      f"{startup_s:.0f} s ({exc}); is it deployed (python -m "
                                      "middleware.runtime.ray_tier)?") from exc
            time.sleep(min(1.0, max(0.05, deadline - time.monotonic())))
    if info.get("kind") != kind or info.get("spec") != spec:
        raise TierUnavailable(f"{endpoint.url} serves the {info.get('kind')} model {info.get('spec')!r}, "
                              f"not the {kind} model {spec!r} this proxy is configured with")
    return info


class RayEmbedder:
    """``middleware.interfaces.Embedder`` on the tier: rows L2-normalised float32 [n, dim]."""

    def __init__(self, endpoint: Endpoint, info: dict[str, Any], sync_batch_size: int = 64) -> None:
        self.endpoint = endpoint
        self.name: str = info["name"]
        self.dim: int = int(info["dim"])
        self.sync_batch_size = sync_batch_size

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _checked(decode_rows(await self.endpoint.post({"inputs": list(texts)})), len(texts), self.dim)

    def embed_sync(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Blocking, for offline jobs such as indexing: ``batch_size`` texts per request."""
        rows = [decode_rows(self.endpoint.post_sync({"inputs": list(chunk)}))
                for chunk in _chunks(texts, batch_size or self.sync_batch_size)]
        return _checked(np.concatenate(rows) if rows else np.zeros((0, self.dim), np.float32), len(texts), self.dim)

    async def aclose(self) -> None:
        await self.endpoint.aclose()


class RayPairScorer:
    """``middleware.interfaces.PairScorer`` on the tier (nli or rerank), with the served model's
    manifest (its max length and calibrated thresholds, which the NLI verifier reads)."""

    def __init__(self, endpoint: Endpoint, info: dict[str, Any], sync_batch_size: int = 64) -> None:
        self.endpoint = endpoint
        self.sync_batch_size = sync_batch_size
        self.task: str = info["kind"]
        self.name: str = info["name"]
        self.labels: list[str] = list(info["labels"])
        self.manifest = Manifest.model_validate(info["manifest"])

    async def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros((0, len(self.labels)), dtype=np.float32)
        answer = await self.endpoint.post({"inputs": [list(pair) for pair in pairs]})
        return _checked(decode_rows(answer), len(pairs), len(self.labels))

    def score_sync(self, pairs: Sequence[tuple[str, str]], batch_size: int | None = None) -> np.ndarray:
        """Blocking, for offline evaluation: ``batch_size`` pairs per request."""
        width = len(self.labels)
        rows = [decode_rows(self.endpoint.post_sync({"inputs": [list(pair) for pair in chunk]}))
                for chunk in _chunks(pairs, batch_size or self.sync_batch_size)]
        return _checked(np.concatenate(rows) if rows else np.zeros((0, width), np.float32), len(pairs), width)

    async def aclose(self) -> None:
        await self.endpoint.aclose()


class RaySeq2Seq:
    """The seq2seq model's ``generate`` and ``generate_fused`` on the tier. Blocking, like the
    in-process model's: the pipeline calls them in worker threads."""

    def __init__(self, endpoint: Endpoint, info: dict[str, Any], sync_batch_size: int = 64) -> None:
        self.endpoint = endpoint
        self.name: str = info["name"]

    def generate(self, texts: Sequence[str], max_new_tokens: int = 64) -> list[str]:
        return self.generate_fused([[text] for text in texts], max_new_tokens)

    def generate_fused(self, groups: Sequence[Sequence[str]], max_new_tokens: int = 64) -> list[str]:
        if not groups:
            return []
        answer = self.endpoint.post_sync({"inputs": [list(group) for group in groups],
                                          "max_new_tokens": max_new_tokens})
        outputs = answer.get("outputs")
        if not isinstance(outputs, list) or len(outputs) != len(groups):
            raise _failed(f"{self.endpoint.url}: expected {len(groups)} outputs")
        return [str(output) for output in outputs]


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[start : start + size] for start in range(0, len(items), max(1, size))]


def _checked(rows: np.ndarray, n: int, width: int) -> np.ndarray:
    if rows.shape != (n, width):
        raise _failed(f"the tier answered {rows.shape} rows, expected {(n, width)}")
    return rows


_CLIENTS: dict[tuple[str, str, str], Any] = {}
_LOCK = threading.Lock()
_KINDS = {"embed": RayEmbedder, "nli": RayPairScorer, "rerank": RayPairScorer, "seq2seq": RaySeq2Seq}


def remote_model(kind: str, spec: str, settings: RuntimeSettings) -> Any:
    """The tier's ``kind`` model (embed, nli, rerank or seq2seq), which must be ``spec``; one
    client per model and tier in the process, like the local runtime's one model per process."""
    url = settings.ray_serve_url.rstrip("/") + ROUTES[kind]
    key = (kind, spec, url)
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            endpoint = Endpoint(url, settings.ray_timeout_s)
            info = describe(endpoint, kind, spec, settings.ray_startup_s)
            client = _CLIENTS[key] = _KINDS[kind](endpoint, info, settings.sync_batch_size)
            log.info("%s model %r served by the Ray Serve tier at %s", kind, spec, url)
        return client


async def close_remote_sessions() -> None:
    """Close every client's HTTP session of the running event loop (before the loop ends)."""
    with _LOCK:
        clients = list(_CLIENTS.values())
    for client in clients:
        await client.endpoint.aclose()


def clear_remote_models() -> None:
    """Forget the clients (tests). Their HTTP sessions are not closed."""
    with _LOCK:
        _CLIENTS.clear()
