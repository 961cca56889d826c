"""Faults: whatever breaks behind the proxy, the client's stream ends cleanly and nothing it
already received is lost or altered. (Upstream errors before the stream, a failure
mid-stream and a hang are in test_api_router.py.)

The pipeline faults run the real ``FactChecker`` with real providers, verifiers, ranker and
cache, and doubles only for the failing part."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import aiohttp
import numpy as np
import pytest
from aiohttp import web

from adapters.search.client import HttpClient, RetryPolicy
from adapters.search.searxng import SearxngSource
from middleware.cache import RedisCache
from middleware.evidence.relevance import RelevanceRanker
from middleware.metrics import UPSTREAM_ERRORS
from middleware.pipeline.alignment import Aligner
from middleware.pipeline.cqgen import SlotQuestionGenerator
from middleware.pipeline.decontext import NoDecontextualiser
from middleware.pipeline.factchecker import FactChecker, PipelineParts
from middleware.pipeline.verifiers import NLIVerifier, SlotsVerifier, Verifier
from middleware.runtime.batcher import MicroBatcher
from middleware.chat.api_router import SERVICE_KEY
from middleware.commands.serve import start_site
from middleware.sse import SSEEvent, SSEParser, delta_content, json_payloads
from middleware.types import Passage
from tests.support.checkers import ScriptedChecker
from tests.support.evidence_doubles import FailingEmbedder, HashEmbedder

TEXT = "The Eiffel Tower is in Paris. It was completed in 1889. Marie Curie was born in Warsaw in 1867."
EVIDENCE = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed in 1889 "
    "as the centrepiece of the World's Fair."
)


# --- helpers --------------------------------------------------------------------------------


def chat_body(text: str = TEXT, mode: str = "annotate", **mock: Any) -> dict[str, Any]:
    return {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Tell me about Paris."}],
            "mock": {"text": text, **mock}, "factcheck": {"mode": mode}}


async def stream_events(url: str, body: dict[str, Any]) -> list[SSEEvent]:
    """Every SSE event the client receives, read to the end of the response."""
    parser = SSEParser()
    events: list[SSEEvent] = []
    async with aiohttp.ClientSession() as session:
        async with asyncio.timeout(60):
            async with session.post(f"{url}/chat/completions", json=body) as response:
                assert response.status == 200, await response.text()
                async for chunk in response.content.iter_any():
                    events += parser.feed(chunk)
    return events + parser.flush()


def reports_of(events: list[SSEEvent]) -> list[dict[str, Any]]:
    return [c["factcheck"]["report"] for c in json_payloads(events) if (c.get("factcheck") or {}).get("type") == "sentence"]


def assert_clean_end(events: list[SSEEvent], mode: str) -> None:
    """[DONE] last; a summary before it unless off; no error event."""
    assert events[-1].is_done
    chunks = json_payloads(events)
    assert not any("error" in c for c in chunks)
    if mode != "off":
        assert chunks[-1]["factcheck"]["type"] == "summary"


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- doubles for the failing part --------------------------------------------------------------


class StaticSource:
    """An evidence source that always returns one passage."""

    name = "static"

    def __init__(self, text: str = EVIDENCE) -> None:
        self.text = text

    async def search(self, query: str, k: int) -> list[Passage]:
        return [Passage(id="static-1", text=self.text, provider="static", source="test://static")]


class RaisingSource:
    """Breaks the EvidenceSource contract (must not raise) the way a buggy provider would."""

    name = "raising"

    async def search(self, query: str, k: int) -> list[Passage]:
        raise ConnectionError("provider exploded")


class SlowSource:
    """Never answers within any sentence budget."""

    name = "slow"

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0

    async def search(self, query: str, k: int) -> list[Passage]:
        self.started += 1
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return []


class BrokenSessionScorer:
    """An NLI PairScorer whose inference session fails, behind the real micro-batcher (as the
    ONNX scorers are): the exception must reach the check, not hang it."""

    labels = ["entailment", "neutral", "contradiction"]

    def __init__(self) -> None:
        self.batcher: MicroBatcher[tuple[str, str], np.ndarray] = MicroBatcher(self._run, max_wait_ms=1.0, name="broken-nli")
        self.calls = 0

    def _run(self, pairs: list[tuple[str, str]]) -> Sequence[np.ndarray]:
        self.calls += 1
        raise RuntimeError("onnxruntime: session run failed")

    async def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        return np.stack(await self.batcher.submit_many(list(pairs)))


pytestmark = pytest.mark.usefixtures("warm_spacy")


ROOMY = {"check.sentence_budget_s": 10.0}
"""A budget no healthy check on a loaded machine runs into: these tests are not about time."""


def pipeline(sources: list, verifier: Verifier | None = None, ranker: RelevanceRanker | None = None) -> FactChecker:
    """The real pipeline with offline backends; only ``sources``/``verifier`` vary."""
    return FactChecker(PipelineParts(
        sources=sources, questions=SlotQuestionGenerator(), decontext=NoDecontextualiser(),
        verifier=verifier or SlotsVerifier(Aligner()), ranker=ranker or RelevanceRanker(),
    ))


class FakeSearxng:
    """A SearxNG JSON API on loopback that returns one result and counts requests."""

    def __init__(self) -> None:
        self.requests = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/search", self.search)
        return app

    async def search(self, request: web.Request) -> web.Response:
        self.requests += 1
        return web.json_response({"results": [
            {"url": "https://example.org/eiffel", "title": "Eiffel Tower", "content": EVIDENCE, "engine": "fake"}
        ]})


# --- invalid SSE -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["off", "annotate", "correct"])
async def test_invalid_sse_event_does_not_break_the_stream(make_proxy, mode):
    proxy = await make_proxy(ScriptedChecker())
    invalid_before = UPSTREAM_ERRORS.labels(kind="invalid_sse")._value.get()
    events = await stream_events(proxy.url, chat_body(mode=mode, invalid_after=4))
    assert_clean_end(events, mode)
    assert delta_content(events) == TEXT  # every valid delta arrived, unaltered and in order
    passed = [e for e in events if e.data == "{not json"]
    assert len(passed) == 1 and passed[0].raw == b"data: {not json\n\n"  # forwarded byte for byte, not dropped
    if mode != "off":
        assert len(reports_of(events)) == 3
        assert UPSTREAM_ERRORS.labels(kind="invalid_sse")._value.get() > invalid_before


# --- evidence sources down or slow -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["annotate", "correct"])
async def test_search_providers_down_give_extrapolatory_not_errors(make_proxy, mode):
    dead = SearxngSource(f"http://127.0.0.1:{closed_port()}", http=HttpClient("test", RetryPolicy(0, 0.01, 0.01)),
                         timeout_s=1.0)
    proxy = await make_proxy(pipeline([dead, RaisingSource()]), **ROOMY)
    try:
        events = await stream_events(proxy.url, chat_body(mode=mode))
    finally:
        await dead.aclose()
    assert_clean_end(events, mode)
    assert delta_content(events) == TEXT
    reports = reports_of(events)
    assert len(reports) == 3
    labels = {r["verdict"]["label"] for r in reports}
    assert "extrapolatory" in labels and labels <= {"extrapolatory", "skipped"}, [r["verdict"]["reason"] for r in reports]
    assert all(r["evidence"] == [] for r in reports)


async def test_slow_search_provider_reports_unverified_timeout_within_budget(make_proxy):
    slow = SlowSource()
    proxy = await make_proxy(pipeline([slow]), **{"check.sentence_budget_s": 1.0})
    events = await stream_events(proxy.url, chat_body(mode="correct"))
    assert_clean_end(events, "correct")
    assert delta_content(events) == TEXT  # held sentences are released at the budget, unedited
    verdicts = [r["verdict"] for r in reports_of(events)]
    assert len(verdicts) == 3
    assert any(v["label"] == "unverified" and v["reason"] == "timeout" for v in verdicts)
    assert all(v["label"] == "skipped" or (v["label"], v["reason"]) == ("unverified", "timeout") for v in verdicts)
    assert slow.cancelled == slow.started  # every search was cancelled at the budget, none left running


# --- a model session that raises ----------------------------------------------------------------


async def test_failing_nli_session_reports_unverified_with_reason(make_proxy):
    scorer = BrokenSessionScorer()
    proxy = await make_proxy(pipeline([StaticSource()], verifier=NLIVerifier(scorer)), **ROOMY)
    try:
        events = await stream_events(proxy.url, chat_body())
    finally:
        await scorer.batcher.aclose()
    assert_clean_end(events, "annotate")
    assert delta_content(events) == TEXT
    checked = [r["verdict"] for r in reports_of(events) if r["verdict"]["label"] != "skipped"]
    assert checked and scorer.calls >= 1
    assert all(v["label"] == "unverified" and v["reason"] == "error: RuntimeError" for v in checked)


async def test_failing_embedder_reports_unverified_with_reason(make_proxy):
    embedder = FailingEmbedder()
    checker = pipeline([StaticSource()], verifier=SlotsVerifier(Aligner(embedder)), ranker=RelevanceRanker(embedder))
    proxy = await make_proxy(checker, **ROOMY)
    events = await stream_events(proxy.url, chat_body(mode="correct"))
    assert_clean_end(events, "correct")
    assert delta_content(events) == TEXT
    checked = [r["verdict"] for r in reports_of(events) if r["verdict"]["label"] != "skipped"]
    assert checked and all(v["label"] == "unverified" and v["reason"].startswith("error: ") for v in checked)


# --- Redis down ----------------------------------------------------------------------------


async def test_redis_down_falls_back_to_local_cache_mid_pipeline(make_proxy):
    fake = FakeSearxng()
    runner, port = await start_site(fake.app(), "127.0.0.1", 0)
    cache = RedisCache(f"redis://127.0.0.1:{closed_port()}/0", retry_after_s=300, socket_timeout_s=0.2)
    source = SearxngSource(f"http://127.0.0.1:{port}", http=HttpClient("test", RetryPolicy(0, 0.01, 0.01)),
                           timeout_s=2.0, cache=cache)
    embedder = HashEmbedder()
    checker = pipeline([source], verifier=SlotsVerifier(Aligner(embedder)), ranker=RelevanceRanker(embedder, cache=cache))
    proxy = await make_proxy(checker, **ROOMY)
    try:
        first = await stream_events(proxy.url, chat_body())
        searched = fake.requests
        second = await stream_events(proxy.url, chat_body())
    finally:
        await source.aclose()
        await cache.aclose()
        await runner.cleanup()
    assert not cache.available  # Redis is down: the in-process fallback served
    for events in (first, second):
        assert_clean_end(events, "annotate")
        assert delta_content(events) == TEXT
        reports = reports_of(events)
        assert len(reports) == 3
        assert all(r["verdict"]["label"] != "unverified" for r in reports)
        assert any(p["text"] == EVIDENCE for r in reports for p in r["evidence"])
    assert searched >= 1 and fake.requests == searched  # the second answer's searches came from the fallback cache
    assert [r["verdict"]["label"] for r in reports_of(first)] == [r["verdict"]["label"] for r in reports_of(second)]


# --- client disconnect in correct mode ---------------------------------------------------------


async def test_client_disconnect_in_correct_mode_cancels_everything(make_proxy):
    checker = ScriptedChecker(delay=30.0)
    proxy = await make_proxy(checker, **{"check.sentence_budget_s": 60})
    text = " ".join(f"Sentence number {i} is here." for i in range(300))
    before = asyncio.all_tasks()
    async with aiohttp.ClientSession() as session:
        response = await session.post(f"{proxy.url}/chat/completions", json=chat_body(text, "correct", token_rate=300))
        assert response.status == 200
        async with asyncio.timeout(10):
            while checker.running == 0:  # correct mode holds the first sentence: nothing is sent yet
                await asyncio.sleep(0.01)
        response.close()
    async with asyncio.timeout(10):
        while checker.running or proxy.app[SERVICE_KEY].streams.active:
            await asyncio.sleep(0.02)
    assert checker.cancelled >= 1
    received = len(proxy.upstream.requests)
    assert received == 1
    await asyncio.sleep(0.2)
    left = [t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()]
    # nothing left: no check, no stream reader, no proxy handler and no upstream handler
    assert left == [], [t.get_coro() for t in left]


async def test_client_disconnect_after_content_keeps_what_was_sent(make_proxy):
    """A client that reads part of a correct-mode answer and leaves got a prefix of the answer."""
    proxy = await make_proxy(ScriptedChecker(), **{"check.sentence_budget_s": 5})
    text = " ".join(f"Sentence number {i} is here." for i in range(200))
    parser, events = SSEParser(), []
    async with aiohttp.ClientSession() as session:
        response = await session.post(f"{proxy.url}/chat/completions", json=chat_body(text, "correct", token_rate=400))
        async with asyncio.timeout(20):
            while len(reports_of(events)) < 3:
                events += parser.feed(await response.content.readany())
        response.close()
    received = delta_content(events)
    assert received and text.startswith(received)
    async with asyncio.timeout(10):
        while proxy.app[SERVICE_KEY].streams.active:
            await asyncio.sleep(0.02)
    assert json.dumps(reports_of(events))  # the reports received are complete JSON objects
