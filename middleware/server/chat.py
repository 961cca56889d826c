"""``POST /v1/chat/completions``: the proxy's serving logic, stream and non-stream."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from middleware.checking import CheckRunner
from middleware.errors import RequestError, UpstreamError
from middleware.evidence.context_source import context_source
from middleware.evidence.request_passages import ContextText, context_passages, request_texts
from middleware.interfaces import Upstream
from middleware.metrics import ACTIVE_STREAMS, ADDED_LATENCY, REQUESTS, TIME_TO_FIRST_TOKEN, UPSTREAM_ERRORS
from middleware.pipeline.memory import MemoryCheck
from middleware.render import WireReports
from middleware.segmenter import segment_text
from middleware.server.protocol import ChatRequest, parse_chat_request, resolve_mode
from middleware.settings import Settings
from middleware.sse import dumps
from middleware.stream import ChatStream, Out
from middleware.types import CheckContext, Mode, Passage, Sentence, SentenceReport

log = logging.getLogger(__name__)

INLINE_SPLIT_CHARS = 4000
"""Request context up to this size is split on the event loop (well under a millisecond)."""

SETTINGS_KEY = web.AppKey("settings", Settings)
UPSTREAM_KEY = web.AppKey("upstream", Upstream)
RUNNER_KEY = web.AppKey("runner", CheckRunner)


class StreamCounter:
    """Streams open now in this app. A slot is taken before the upstream is called, so
    requests waiting on a slow upstream count against the limit too."""

    def __init__(self) -> None:
        self.active = 0

    def acquire(self, limit: int) -> None:
        """Take a slot or raise 429 (no await in between: atomic on the event loop)."""
        if self.active >= limit:
            raise RequestError("too many concurrent streams; retry shortly", status=429,
                               code="too_many_streams", type_="rate_limit_error", retry_after="1")
        self.active += 1
        ACTIVE_STREAMS.inc()

    def release(self) -> None:
        self.active -= 1
        ACTIVE_STREAMS.dec()


STREAMS_KEY = web.AppKey("streams", StreamCounter)


def upstream_headers(request: web.Request) -> dict[str, str]:
    """Client headers for the upstream. With proxy keys configured the client's
    Authorization is the proxy key, which must never travel on."""
    headers = {k.lower(): v for k, v in request.headers.items()}
    if request.app[SETTINGS_KEY].server.api_keys:
        headers.pop("authorization", None)
    return headers


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=dumps)


MEMORY_WAIT_SHARE = 0.5
"""Share of the sentence budget a check may spend (from its start) waiting for the closed-book answer."""


async def check_context(
    request: ChatRequest, mode: Mode, http: web.Request | None = None, forward: dict[str, Any] | None = None
) -> CheckContext:
    """The request's ``CheckContext``: its factcheck options and its own context passages
    (split in a worker thread: a request may carry a megabyte of documents). With ``http``
    and ``forward`` (the body going upstream) and ``factcheck.memory_check`` set, the memory
    check's closed-book upstream call starts now; ``release_context`` stops it."""
    options = request.factcheck.model_dump(exclude={"mode"}, mode="json") if request.factcheck else {}
    context = CheckContext(user_message=request.last_user_message(), mode=mode, options=options)
    if mode is Mode.OFF:
        return context
    texts = request_texts(request)
    size = sum(len(t.text) for t in texts)
    if http is not None and size > (cap := http.app[SETTINGS_KEY].server.max_context_chars):
        raise RequestError(f"request context too large: {size} characters, at most {cap} (server.max_context_chars)",
                           param="messages", code="context_too_large")
    if size > INLINE_SPLIT_CHARS:  # a big document: split (and index for search) off the event loop
        passages = await asyncio.to_thread(_split_and_index, texts)
    else:  # the common case (nothing or a short system prompt): a thread hop would cost more
        passages = context_passages(texts)
    memory = None
    wanted = request.factcheck is not None and request.factcheck.memory_check
    if wanted and passages and http is not None and forward is not None:
        settings = http.app[SETTINGS_KEY]
        memory = MemoryCheck.start(
            http.app[UPSTREAM_KEY], forward, upstream_headers(http), context.user_message or "",
            max_tokens=settings.pipeline.memory_max_tokens, margin=settings.pipeline.memory_margin,
            wait_s=MEMORY_WAIT_SHARE * settings.check.sentence_budget_s,
        )
    return context.model_copy(update={"request_passages": passages, "memory": memory})


def _split_and_index(texts: list[ContextText]) -> list[Passage]:
    """The passages of ``texts``, with their search index built (it is cached for the checks)."""
    passages = context_passages(texts)
    context_source(passages)
    return passages


def release_context(context: CheckContext) -> None:
    """The request is over: stop its closed-book call if it still runs."""
    if context.memory is not None:
        context.memory.close()


async def chat_completions(request: web.Request) -> web.StreamResponse:
    settings = request.app[SETTINGS_KEY]
    started = time.perf_counter()
    raw = await request.read()
    chat, forward = parse_chat_request(raw, settings.server.max_messages, settings.server.max_json_depth)
    mode = resolve_mode(chat, request.headers.get("X-Factcheck-Mode"), settings.check.default_mode)
    REQUESTS.labels(mode=mode.value, stream=str(chat.stream).lower()).inc()
    if chat.stream:
        return await _stream(request, chat, forward, mode, started)
    return await _complete(request, chat, forward, mode)


@asynccontextmanager
async def open_chat_stream(
    request: web.Request, chat: ChatRequest, forward: dict[str, Any], mode: Mode, started: float
) -> AsyncIterator[ChatStream]:
    """Open the upstream stream and wrap it in a ``ChatStream``; on exit close the upstream
    and record the stream bookkeeping (active streams, added latency). Shared by the SSE
    endpoint and the websocket. Upstream errors before the stream propagate (status + body)."""
    settings = request.app[SETTINGS_KEY]
    counter = request.app[STREAMS_KEY]
    counter.acquire(settings.server.max_concurrent_streams)
    try:
        async with _opened(request, chat, forward, mode, started) as chat_stream:
            yield chat_stream
    finally:
        counter.release()


@asynccontextmanager
async def _opened(
    request: web.Request, chat: ChatRequest, forward: dict[str, Any], mode: Mode, started: float
) -> AsyncIterator[ChatStream]:
    runner = request.app[RUNNER_KEY]
    context = await check_context(chat, mode, request, forward)  # the memory check's call starts with the request
    try:
        stream = await request.app[UPSTREAM_KEY].open_stream(forward, upstream_headers(request))
    except BaseException:
        release_context(context)
        raise
    max_event = request.app[SETTINGS_KEY].upstream.max_event_bytes
    chat_stream = ChatStream(stream, mode, runner.for_stream(), context, runner.summarize, started, max_event)
    try:
        yield chat_stream
    finally:
        release_context(context)
        stream.close()
        if chat_stream.state.upstream_done_at is not None:
            ADDED_LATENCY.labels(mode=mode.value).observe(time.perf_counter() - chat_stream.state.upstream_done_at)


async def _stream(
    request: web.Request, chat: ChatRequest, forward: dict[str, Any], mode: Mode, started: float
) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Factcheck-Mode": mode.value}
    )
    async with open_chat_stream(request, chat, forward, mode, started) as chat_stream:
        try:
            await response.prepare(request)
            async for out in chat_stream.run():
                await response.write(out.sse())
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            log.info("client went away; upstream request and checks cancelled")
            raise
    return response


async def _complete(request: web.Request, chat: ChatRequest, forward: dict[str, Any], mode: Mode) -> web.Response:
    context = await check_context(chat, mode, request, forward)  # the memory check's call starts with the request
    try:
        return await _complete_checked(request, forward, mode, context)
    finally:
        release_context(context)


async def _complete_checked(
    request: web.Request, forward: dict[str, Any], mode: Mode, context: CheckContext
) -> web.Response:
    upstream = request.app[UPSTREAM_KEY]
    t0 = time.perf_counter()
    raw, completion = await upstream.complete(forward, upstream_headers(request))
    upstream_done = time.perf_counter()
    TIME_TO_FIRST_TOKEN.labels(mode=mode.value).observe(upstream_done - t0)
    if mode is Mode.OFF:
        return web.Response(body=raw, content_type="application/json")
    content = _message_content(completion)
    if content is None:
        return web.Response(body=raw, content_type="application/json")
    runner = request.app[RUNNER_KEY]
    reports = await check_text(runner, content, context)
    summary = await runner.summarize(reports, mode)
    if mode is Mode.CORRECT:
        completion["choices"][0]["message"]["content"] = apply_corrections(content, reports)
    wire = WireReports()
    completion["factcheck"] = {
        "reports": [wire.report(r) for r in sorted(reports, key=lambda r: r.index)],
        "summary": wire.summary(summary),
    }
    ADDED_LATENCY.labels(mode=mode.value).observe(time.perf_counter() - upstream_done)
    return _json(completion)


def _message_content(completion: dict[str, Any]) -> str | None:
    try:
        content = completion["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) else None


def sentences_of(text: str) -> list[Sentence]:
    checkable = [s for s in segment_text(text) if s.checkable]
    return [
        Sentence(index=i, start=s.start, end=s.end, text=s.text, code_spans=s.code_spans)
        for i, s in enumerate(checkable)
    ]


async def check_text(runner: CheckRunner, text: str, context: CheckContext) -> list[SentenceReport]:
    """Check every sentence of a complete text concurrently (non-stream requests, CLI)."""
    checks = runner.for_stream()
    sentences = sentences_of(text)
    for sentence in sentences:
        previous = [s.text for s in sentences[: sentence.index]]
        checks.submit(sentence, context.model_copy(update={"previous": previous}))
    try:
        return await checks.wait_all()
    finally:
        await checks.cancel_all()


def apply_corrections(text: str, reports: list[SentenceReport]) -> str:
    """Replace each corrected sentence's span by its corrected text."""
    out, cursor = [], 0
    for report in sorted(reports, key=lambda r: r.start):
        if report.corrected_text is None:
            continue
        out.append(text[cursor : report.start])
        out.append(report.corrected_text)
        cursor = report.end
    out.append(text[cursor:])
    return "".join(out)


def upstream_error_response(exc: UpstreamError) -> web.Response:
    UPSTREAM_ERRORS.labels(kind=exc.kind).inc()
    headers = {"Retry-After": exc.retry_after} if exc.retry_after else None
    status = exc.status if 400 <= exc.status < 600 else 502
    response = _json(exc.client_body(), status=status)
    if headers:
        response.headers.update(headers)
    return response


def request_error_response(exc: RequestError) -> web.Response:
    response = _json(exc.body(), status=exc.status)
    if exc.retry_after:
        response.headers["Retry-After"] = exc.retry_after
    return response


__all__ = ["chat_completions", "check_text", "apply_corrections", "Out"]
