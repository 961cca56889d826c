"""The memory-hallucination margin signal end to end through the proxy (scripted demo upstream on
loopback, the real ``FactChecker`` with offline backends and a hashed bag-of-words embedder), and
a closed-book call that fails or answers too late. (The closed-book request itself:
test_closed_book.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from adapters.demo_upstream import tokenize
from middleware.chat.protocol import ChatRequest
from middleware.errors import UpstreamError
from middleware.checking import CheckRunner
from middleware.settings import CheckSettings
from middleware.evidence.request_passages import request_passages
from middleware.metrics import MEMORY_CHECK_LATENCY, MEMORY_CHECK_TOKENS
from middleware.pipeline.closed_book import ClosedBook
from middleware.types import CheckContext, Sentence
from tests.support.context_doubles import (
    CLOSED_BOOK,
    CONTRADICTS,
    DOCUMENT,
    FROM_MEMORY,
    QUESTION,
    ROOMY,
    body,
    checker,
    stream_reports,
)


pytestmark = pytest.mark.usefixtures("warm_spacy")


def counter(metric) -> float:
    return metric._value.get()


def histogram_count(metric) -> float:
    return next(s.value for s in metric.collect()[0].samples if s.name.endswith("_count"))


# --- end to end through the proxy --------------------------------------------------------------


async def test_answer_from_memory_against_the_context_is_flagged_by_the_margin(make_proxy):
    fc, _ = checker(policy="only")
    proxy = await make_proxy(fc, **ROOMY)
    tokens, calls = counter(MEMORY_CHECK_TOKENS), histogram_count(MEMORY_CHECK_LATENCY)
    content, reports = await stream_reports(proxy.url, body(FROM_MEMORY, memory_check=True))
    assert content == FROM_MEMORY
    memorised, grounded = (r["memory"] for r in reports)
    assert memorised["flagged"] and memorised["margin"] == 1.4
    assert memorised["closed_book_similarity"] > 1.4 * memorised["context_similarity"]
    assert not grounded["flagged"]
    assert grounded["context_similarity"] > grounded["closed_book_similarity"]
    assert reports[0]["verdict"]["label"] != "attributable"  # the verdict comes from the verifier, not the signal

    main, closed = sorted(proxy.upstream.requests, key=lambda r: r["stream"], reverse=True)
    assert closed["messages"] == [{"role": "user", "content": QUESTION}]  # without the context
    assert (closed["stream"], closed["max_tokens"], closed["model"]) == (False, 48, main["model"])
    assert counter(MEMORY_CHECK_TOKENS) - tokens == 10 + len(tokenize(CLOSED_BOOK))  # the demo's prompt + completion
    assert histogram_count(MEMORY_CHECK_LATENCY) == calls + 1


async def test_memory_check_in_a_non_stream_request(make_proxy):
    fc, _ = checker(policy="only")
    proxy = await make_proxy(fc, **ROOMY)
    async with aiohttp.ClientSession() as session:
        request = body(FROM_MEMORY, stream=False, memory_check=True)
        async with session.post(f"{proxy.url}/chat/completions", json=request) as resp:
            reports = (await resp.json())["factcheck"]["reports"]
    assert [r["memory"]["flagged"] for r in reports] == [True, False]


async def test_no_closed_book_call_without_context(make_proxy):
    fc, _ = checker()
    proxy = await make_proxy(fc, **ROOMY)
    request = body(CONTRADICTS, memory_check=True)
    request["messages"] = [{"role": "user", "content": QUESTION}]
    del request["mock"]["closed_book_text"]
    _, [report] = await stream_reports(proxy.url, request)
    assert report["memory"] is None and len(proxy.upstream.requests) == 1


# --- a closed-book call that fails or is late --------------------------------------------------


class FailingUpstream:
    """Only ``complete`` is used by the memory check; it fails like an upstream 500."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    async def complete(self, body: dict[str, Any], headers: Any) -> tuple[bytes, dict[str, Any]]:
        await asyncio.sleep(self.delay)
        raise UpstreamError("upstream returned 500", 500, kind="server_error")


async def test_failed_closed_book_call_gives_no_signal_and_a_normal_verdict(caplog):
    fc, _ = checker(policy="only")
    passages = request_passages(ChatRequest.model_validate({"messages": [{"role": "system", "content": DOCUMENT}]}))
    closed_book = ClosedBook.start(FailingUpstream(), body(CONTRADICTS), {}, QUESTION, max_tokens=16)
    checks = fc.open(CheckContext(request_passages=passages), closed_book.task)
    report = await checks.check(Sentence(index=0, start=0, end=len(CONTRADICTS), text=CONTRADICTS), [])
    assert report.memory is None and report.verdict.label == "contradictory"
    assert "closed-book call for the memory check failed" in caplog.text


async def test_closed_book_answer_too_late_gives_no_signal_and_is_cancelled_with_the_request():
    fc, _ = checker(policy="only")
    passages = request_passages(ChatRequest.model_validate({"messages": [{"role": "system", "content": DOCUMENT}]}))
    closed_book = ClosedBook.start(FailingUpstream(delay=30), body(CONTRADICTS), {}, QUESTION, max_tokens=16)
    fc.parts.memory_wait_s = 0.05
    session = CheckRunner(fc, CheckSettings()).session(CheckContext(request_passages=passages), closed_book.task)
    report = await session.submit(Sentence(index=0, start=0, end=len(CONTRADICTS), text=CONTRADICTS), [])
    assert report.memory is None and report.verdict.label == "contradictory"
    session.close()
    await asyncio.sleep(0)
    assert closed_book.task.done()
