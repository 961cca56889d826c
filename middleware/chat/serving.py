"""The chat endpoint's logic, for any transport: the request's check context, the upstream
call, the checked stream and the non-stream completion. Knows nothing of HTTP: the routers
hand it parsed requests and the headers to forward, and encode what it returns."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from middleware.chat.checked_stream import AnswerSource, CheckedAnswer, CheckedStream, check_answer
from middleware.chat.chunks import ChunkItem, UpstreamChunks, message_content
from middleware.chat.context_cutter import ContextCutter
from middleware.chat.grounding_prompt import add_grounding, requested_corpus
from middleware.chat.parsing import parse_chat_request, resolve_mode
from middleware.chat.protocol import ChatRequest
from middleware.chat.wire import WireReports
from middleware.checking import CheckRunner, CheckSession
from middleware.errors import RequestError
from middleware.evidence.request_passages import request_texts
from middleware.interfaces import Upstream, UpstreamStream
from middleware.metrics import ACTIVE_STREAMS, ADDED_LATENCY, REQUESTS, TIME_TO_FIRST_TOKEN, UPSTREAM_LATENCY
from middleware.pipeline.closed_book import ClosedBook
from middleware.settings import Settings
from middleware.translation import completions
from middleware.types import CheckContext, GroundingPrompt, Mode

class ClosableSource(AnswerSource[Any], Protocol):
    """An answer source over an upstream stream, closed when the request is over."""

    def close(self) -> None: ...


S = TypeVar("S", bound=ClosableSource)

class StreamCounter:
    """Streams open now. A slot is taken before the upstream is called, so requests waiting
    on a slow upstream count against the limit too."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.active = 0

    @property
    def full(self) -> bool:
        return self.active >= self.limit

    def acquire(self) -> None:
        """Take a slot or raise 429 (no await in between: atomic on the event loop)."""
        if self.full:
            raise too_many_streams()
        self.active += 1
        ACTIVE_STREAMS.inc()

    def release(self) -> None:
        self.active -= 1
        ACTIVE_STREAMS.dec()


def too_many_streams() -> RequestError:
    """The one 429 for a full stream limit, over HTTP and the websocket alike."""
    return RequestError("too many concurrent streams; retry shortly", status=429, code="too_many_streams",
                        type_="rate_limit_error", retry_after="1")


@dataclass(frozen=True, slots=True)
class OpenStream:
    """A checked upstream stream, and the upstream's chunks (the template of the proxy's own)."""

    checked: CheckedStream[ChunkItem]
    chunks: UpstreamChunks


class ChatService:
    """Process-wide: the settings, the upstream, the check runner and the stream limit."""

    def __init__(self, settings: Settings, upstream: Upstream, runner: CheckRunner,
                 speaking: Callable[[str], Upstream] | None = None) -> None:
        self.settings = settings
        self.upstream = upstream
        self.runner = runner
        self.streams = StreamCounter(settings.server.max_concurrent_streams)
        self.cutter = ContextCutter()
        self._speaking = speaking

    def upstream_speaking(self, api: str | None) -> Upstream:
        """The upstream as a chat upstream, spoken to in ``api`` (None: ``upstream.api``)."""
        if api is None or api == self.settings.upstream.api:
            return self.upstream
        if self._speaking is None:
            raise RequestError(f"the upstream speaks only {self.settings.upstream.api!r} (upstream.api)",
                               param="upstream_api", code="invalid_value")
        return self._speaking(api)

    def read_request(self, raw: bytes, mode_header: str | None) -> tuple[ChatRequest, dict[str, Any], Mode]:
        """A request body read under the server's limits: the parsed request, the body to
        forward (without ``factcheck``) and its mode (body, else the ``X-Factcheck-Mode``
        header, else the default); counted in ``factcheck_requests_total``."""
        server = self.settings.server
        chat, forward = parse_chat_request(raw, server.max_messages, server.max_json_depth)
        mode = resolve_mode(chat, mode_header, self.settings.check.default_mode)
        REQUESTS.labels(mode=mode.value, stream=str(chat.stream).lower()).inc()
        return chat, forward, mode

    def grounded(
        self, chat: ChatRequest, forward: dict[str, Any], mode: Mode
    ) -> tuple[dict[str, Any], GroundingPrompt | None]:
        """The body to send upstream: ``forward`` itself when no grounding instruction applies
        (``factcheck.grounding_prompt``, else ``check.grounding_prompt``), else a copy with it."""
        option = chat.factcheck.grounding_prompt if chat.factcheck is not None else None
        corpus = requested_corpus(option, self.settings.check.grounding_prompt, mode)
        if corpus is None:
            return forward, None
        return add_grounding(forward, corpus, self.settings.check.grounding_placement)

    async def request_context(
        self, chat: ChatRequest, mode: Mode, grounding: GroundingPrompt | None = None,
    ) -> CheckContext:
        """The request's ``CheckContext``: its factcheck options, the grounding instruction
        added (for the summary) and its own context passages (a large context cut in a
        process of its own, ``ContextCutter``: a request may carry a megabyte of documents)."""
        options = chat.factcheck.model_dump(exclude={"mode"}, mode="json") if chat.factcheck else {}
        context = CheckContext(user_message=chat.last_user_message(), mode=mode, options=options,
                               grounding_prompt=grounding)
        if mode is Mode.OFF:
            return context
        texts = request_texts(chat)
        size = sum(len(t.text) for t in texts)
        if size > (cap := self.settings.server.max_context_chars):
            raise RequestError(f"request context too large: {size} characters, at most {cap} "
                               "(server.max_context_chars)", param="messages", code="context_too_large")
        return context.model_copy(update={"request_passages": await self.cutter.passages(texts)})

    def closed_book(
        self, chat: ChatRequest, context: CheckContext, forward: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
    ) -> asyncio.Task[str | None] | None:
        """With ``factcheck.memory_check`` set and context passages to compare with, the
        memory check's closed-book upstream call, started now; the request's session cancels
        it. It asks the user's question as the client wrote it (``forward``), without the
        grounding instruction: the ungrounded baseline of what the model says from memory."""
        wanted = chat.factcheck is not None and chat.factcheck.memory_check
        if not wanted or not context.request_passages or forward is None:
            return None
        return ClosedBook.start(self.upstream, forward, headers or {}, context.user_message or "",
                                self.settings.pipeline.memory_max_tokens).task

    async def request_session(
        self, chat: ChatRequest, mode: Mode, forward: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None, grounding: GroundingPrompt | None = None,
    ) -> CheckSession:
        """The request's ``CheckSession`` (its context, its closed-book call started now);
        the caller closes it when the request is over."""
        context = await self.request_context(chat, mode, grounding)
        return self.runner.session(context, self.closed_book(chat, context, forward, headers))

    @asynccontextmanager
    async def open_stream(
        self, chat: ChatRequest, forward: dict[str, Any], mode: Mode, headers: Mapping[str, str], started: float,
        upstream: Upstream | None = None,
    ) -> AsyncIterator[OpenStream]:
        """Take a stream slot, open the upstream stream and check it; on exit close the
        upstream and record the added latency. Upstream errors before the stream propagate.
        ``upstream``: another chat view of the upstream (``upstream_speaking``)."""
        body, grounding = self.grounded(chat, forward, mode)
        max_event_bytes = self.settings.upstream.max_event_bytes
        async with self.open_checked(chat, forward, body, grounding, mode, headers, started, upstream or self.upstream,
                                     lambda opened: UpstreamChunks(opened, max_event_bytes)) as (checked, chunks):
            yield OpenStream(checked, chunks)

    @asynccontextmanager
    async def open_checked(
        self, chat: ChatRequest, forward: dict[str, Any], body: dict[str, Any], grounding: GroundingPrompt | None,
        mode: Mode, headers: Mapping[str, str], started: float, upstream: Upstream,
        source_of: Callable[[UpstreamStream], S],
    ) -> AsyncIterator[tuple[CheckedStream[Any], S]]:
        """``open_stream`` for any face: ``body`` (in ``upstream``'s API) goes up, and its
        stream is read as ``source_of`` makes it (the face's ``AnswerSource``). ``chat`` is
        the request as chat completions (its context and options), ``forward`` what the
        closed-book call of the memory check asks."""
        self.streams.acquire()
        try:
            session = await self.request_session(chat, mode, forward, headers, grounding)  # the memory call starts
            try:
                sent = time.perf_counter()
                opened = await upstream.open_stream(body, headers)
                UPSTREAM_LATENCY.labels(stream="true").observe(time.perf_counter() - sent)
                source = source_of(opened)
            except BaseException:
                session.close()
                raise
            checked: CheckedStream[Any] = CheckedStream(source, session, started)
            try:
                yield checked, source
            finally:
                session.close()
                source.close()
                if checked.answer_done_at is not None:
                    ADDED_LATENCY.labels(mode=mode.value).observe(time.perf_counter() - checked.answer_done_at)
        finally:
            self.streams.release()

    async def complete(
        self, chat: ChatRequest, forward: dict[str, Any], mode: Mode, headers: Mapping[str, str],
    ) -> bytes | dict[str, Any]:
        """A non-stream completion: the upstream's bytes as they came (off mode, or nothing to
        check), else its JSON with the ``factcheck`` object (correct mode: content corrected)."""
        body, grounding = self.grounded(chat, forward, mode)
        context = await self.request_context(chat, mode, grounding)
        closed_book = self.closed_book(chat, context, forward, headers)  # the memory call starts now
        try:
            t0 = time.perf_counter()
            raw, completion = await self.upstream.complete(body, headers)
            upstream_done = time.perf_counter()
            TIME_TO_FIRST_TOKEN.labels(mode=mode.value).observe(upstream_done - t0)
            UPSTREAM_LATENCY.labels(stream="false").observe(upstream_done - t0)
            content = message_content(completion) if mode is not Mode.OFF else None
            if content is None:
                return raw
            answer = await check_answer(self.runner, content, context, closed_book)
            if mode is Mode.CORRECT or answer.blocked is not None:
                completions.replace_text(completion, "chat", answer.text)
            if answer.blocked is not None:
                completions.withhold(completion, "chat")
            completion["factcheck"] = completion_factcheck(answer)
            ADDED_LATENCY.labels(mode=mode.value).observe(time.perf_counter() - upstream_done)
            return completion
        finally:
            stop(closed_book)


def completion_factcheck(answer: CheckedAnswer) -> dict[str, Any]:
    """A checked non-stream answer's ``factcheck`` object (``protocol.CompletionFactcheck``),
    each passage's text once; ``blocked`` only when block mode stopped it."""
    assert answer.summary is not None  # not off mode
    wire = WireReports()
    factcheck = {"reports": [wire.report(r) for r in answer.reports], "summary": wire.summary(answer.summary)}
    if answer.blocked is not None:
        factcheck["blocked"] = {"index": answer.blocked.report.index, "reason": answer.blocked.reason}
    return factcheck


def stop(closed_book: asyncio.Task[str | None] | None) -> None:
    """The request is over: stop its closed-book call if it still runs."""
    if closed_book is not None:
        closed_book.cancel()
