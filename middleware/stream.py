"""One streamed chat completion going through the proxy.

``ChatStream.run()`` consumes the upstream's SSE events and yields what the client gets, as
``Out`` items: either an upstream event forwarded byte for byte (``raw``), or a chunk the
proxy made (``payload``). The HTTP endpoint writes ``raw`` (or encodes ``payload``) as SSE;
the websocket endpoint sends ``payload`` as JSON.

Modes:
- off: a byte pipe: each upstream read goes out in one write, untouched; only event ends are
  looked for, so that an error event can follow whole events.
- annotate: events pass through at once; content of choice 0 is segmented and checked
  beside the stream; each report goes out as soon as it is ready; summary before [DONE].
- correct: content of choice 0 is held per sentence until its check finishes (bounded by
  the budget) and then sent, corrected where the checker edited it, followed by its report.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from middleware.checking import StreamChecks
from middleware.errors import UpstreamError, error_body
from middleware.interfaces import UpstreamStream
from middleware.metrics import TIME_TO_FIRST_TOKEN, UPSTREAM_ERRORS
from middleware.render import WireReports
from middleware.segmenter import StreamSegmenter
from middleware.sse import DEFAULT_MAX_EVENT_BYTES, EventCutter, EventTooLarge, SSEEvent, encode_event
from middleware.types import CheckContext, Mode, Segment, Sentence, SentenceReport, StreamSummary

log = logging.getLogger(__name__)

DONE_EVENT = b"data: [DONE]\n\n"


@dataclass(slots=True)
class Out:
    """One item for the client: ``raw`` upstream bytes, or a ``payload`` the proxy made."""

    payload: dict[str, Any] | str | None = None
    raw: bytes | None = None

    def sse(self) -> bytes:
        return self.raw if self.raw is not None else encode_event(self.payload)


@dataclass
class _Pending:
    """An item of the ordered output in correct mode."""

    segment: Segment | None = None
    task: asyncio.Task[SentenceReport] | None = None
    out: Out | None = None


@dataclass
class StreamState:
    """What the stream has learnt so far (chunk template, timings, reports)."""

    template: dict[str, Any] = field(default_factory=dict)
    reports: list[SentenceReport] = field(default_factory=list)
    sentences: list[Sentence] = field(default_factory=list)
    first_content_at: float | None = None
    upstream_done_at: float | None = None


class ChatStream:
    def __init__(
        self,
        upstream: UpstreamStream,
        mode: Mode,
        checks: StreamChecks,
        context: CheckContext,
        summarize: Callable[[list[SentenceReport], Mode], Any],
        started_at: float | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self._upstream = upstream
        self._max_event_bytes = max_event_bytes
        self._wire_reports = WireReports()
        self.mode = mode
        self._checks = checks
        self._context = context
        self._summarize = summarize
        self._segmenter = StreamSegmenter()
        self.state = StreamState()
        self._started_at = started_at or time.perf_counter()

    # ------------------------------------------------------------------ public
    async def run(self) -> AsyncIterator[Out]:
        """Yield the client's stream. Cancelling the consumer cancels the pending checks."""
        try:
            if self.mode is Mode.OFF:
                async for out in self._run_off():
                    yield out
            else:
                run = self._run_annotate() if self.mode is Mode.ANNOTATE else self._run_correct()
                async for out in run:
                    yield self._wire(out)
        finally:
            await self._checks.cancel_all()

    # ------------------------------------------------------------------ modes
    async def _run_off(self) -> AsyncIterator[Out]:
        cutter = EventCutter(self._max_event_bytes)
        try:
            async for chunk in self._upstream.chunks():
                if whole := cutter.feed(chunk):
                    self._mark_first_content()
                    yield Out(raw=whole)
            if rest := cutter.flush():
                self._mark_first_content()
                yield Out(raw=rest)
        except UpstreamError as exc:
            yield self._error_out(exc)
        except EventTooLarge as exc:
            yield self._error_out(UpstreamError(f"upstream sent an event larger than {exc.limit} bytes",
                                                kind="event_too_large"))
        self.state.upstream_done_at = time.perf_counter()

    async def _run_annotate(self) -> AsyncIterator[Out]:
        async for out in self._drain(self._annotate_reader, _single):
            yield out

    async def _drain(
        self, reader: Callable[[asyncio.Queue[Any]], Awaitable[None]], expand: Callable[[Any], AsyncIterator[Out]]
    ) -> AsyncIterator[Out]:
        """Run ``reader`` (filling a queue until it puts None) and yield what each queued
        item expands to; stopping early cancels the reader. A reader that fails in a way it
        did not handle still ends the stream: with an error event, not a hang."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        task = asyncio.create_task(reader(queue))
        task.add_done_callback(lambda t: self._on_reader_done(t, queue))
        try:
            while (item := await queue.get()) is not None:
                async for out in expand(item):
                    yield out
        finally:
            if not task.done():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _on_reader_done(self, task: asyncio.Task[None], queue: asyncio.Queue[Any]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        log.error("stream reader failed", exc_info=task.exception())
        out = Out(payload=error_body("the proxy failed while relaying the answer", "server_error", None,
                                     "internal_error"))
        queue.put_nowait(out if self.mode is Mode.ANNOTATE else _Pending(out=out))
        queue.put_nowait(None)

    async def _annotate_reader(self, queue: asyncio.Queue[Out | None]) -> None:
        done_event: bytes | None = None
        try:
            async for event in self._upstream.events():
                if event.is_done:
                    done_event = event.raw
                    break
                content = _content0(self._parse(event))
                queue.put_nowait(Out(raw=event.raw))
                if content:
                    self._mark_first_content()
                    self._submit(self._segmenter.feed(content), queue)
        except UpstreamError as exc:
            await self._checks.cancel_all()
            queue.put_nowait(self._error_out(exc))
            queue.put_nowait(None)
            return
        self.state.upstream_done_at = time.perf_counter()
        self._submit(self._segmenter.flush(), queue)
        await self._checks.wait_all()
        for out in await self._closing(done_event):
            queue.put_nowait(out)
        queue.put_nowait(None)

    async def _run_correct(self) -> AsyncIterator[Out]:
        async for out in self._drain(self._correct_reader, self._release):
            yield out

    async def _correct_reader(self, queue: asyncio.Queue[_Pending | None]) -> None:
        done_event: bytes | None = None
        try:
            async for event in self._upstream.events():
                if event.is_done:
                    done_event = event.raw
                    break
                chunk = self._parse(event)
                content = _content0(chunk)
                rest: Out | None = Out(raw=event.raw)
                if content:
                    self._enqueue_segments(self._segmenter.feed(content), queue)
                    rest = _without_content0(chunk)
                if chunk is not None and _finish_reason0(chunk):
                    self._enqueue_segments(self._segmenter.flush(), queue)
                if rest is not None:
                    queue.put_nowait(_Pending(out=rest))
        except UpstreamError as exc:
            # Nothing held is lost: the rest is checked (within the budget) and sent with its
            # report like any sentence, then the error event ends the stream.
            self._enqueue_segments(self._segmenter.flush(), queue)
            queue.put_nowait(_Pending(out=self._error_out(exc)))
            queue.put_nowait(None)
            return
        self.state.upstream_done_at = time.perf_counter()
        self._enqueue_segments(self._segmenter.flush(), queue)
        await self._checks.wait_all()
        for out in await self._closing(done_event):
            queue.put_nowait(_Pending(out=out))
        queue.put_nowait(None)

    async def _release(self, item: _Pending) -> AsyncIterator[Out]:
        """Correct mode: emit one ordered item, waiting for its check if it has one."""
        if item.out is not None:
            yield item.out
            return
        assert item.segment is not None
        text = item.segment.text
        report = await _report_of(item.task) if item.task is not None else None
        if report is not None and report.corrected_text is not None:
            text = report.corrected_text
        if text:
            self._mark_first_content()
            yield Out(payload=self._content_chunk(text))
        if report is not None:
            yield Out(payload=self._factcheck_chunk({"type": "sentence", "report": report}))

    # ------------------------------------------------------------------ helpers
    def _submit(self, segments: list[Segment], queue: asyncio.Queue[Out | None]) -> None:
        """Annotate mode: start a check per sentence; its report is queued when ready."""
        for segment in segments:
            sentence = self._sentence_of(segment)
            if sentence is None:
                continue
            task = self._checks.submit(sentence, self._context_for(sentence))
            task.add_done_callback(lambda t, q=queue: self._on_report(t, q))

    def _on_report(self, task: asyncio.Task[SentenceReport], queue: asyncio.Queue[Out | None]) -> None:
        if task.cancelled() or task.exception() is not None:
            return
        report = task.result()
        self.state.reports.append(report)
        queue.put_nowait(Out(payload=self._factcheck_chunk({"type": "sentence", "report": report})))

    def _enqueue_segments(self, segments: list[Segment], queue: asyncio.Queue[_Pending | None]) -> None:
        for segment in segments:
            sentence = self._sentence_of(segment)
            task = self._checks.submit(sentence, self._context_for(sentence)) if sentence is not None else None
            if task is not None:  # recorded when done: the summary may be made before the release
                task.add_done_callback(self._record_report)
            queue.put_nowait(_Pending(segment=segment, task=task))

    def _record_report(self, task: asyncio.Task[SentenceReport]) -> None:
        if not task.cancelled() and task.exception() is None:
            self.state.reports.append(task.result())

    def _sentence_of(self, segment: Segment) -> Sentence | None:
        if not segment.checkable:
            return None
        sentence = Sentence(
            index=len(self.state.sentences),
            start=segment.start,
            end=segment.end,
            text=segment.text,
            code_spans=segment.code_spans,
        )
        self.state.sentences.append(sentence)
        return sentence

    def _context_for(self, sentence: Sentence) -> CheckContext:
        previous = [s.text for s in self.state.sentences[: sentence.index]]
        return self._context.model_copy(update={"previous": previous})

    async def _closing(self, done_event: bytes | None) -> list[Out]:
        """The summary chunk, then [DONE] (the upstream's own bytes when it sent one)."""
        summary: StreamSummary = await self._summarize(self.state.reports, self.mode)
        added = None
        if self.state.upstream_done_at is not None:
            added = (time.perf_counter() - self.state.upstream_done_at) * 1000.0
        summary = summary.model_copy(update={"added_latency_ms": added})
        payload = self._factcheck_chunk({"type": "summary", "summary": summary})
        return [Out(payload=payload), Out(raw=done_event or DONE_EVENT)]

    def _wire(self, out: Out) -> Out:
        """Reports and the summary are serialised as they leave, in the order the client gets
        them (see ``WireReports``: each evidence text once per stream)."""
        factcheck = out.payload.get("factcheck") if isinstance(out.payload, dict) else None
        if isinstance(factcheck, dict):
            if isinstance(report := factcheck.get("report"), SentenceReport):
                factcheck["report"] = self._wire_reports.report(report)
            elif isinstance(summary := factcheck.get("summary"), StreamSummary):
                factcheck["summary"] = self._wire_reports.summary(summary)
        return out

    def _parse(self, event: SSEEvent) -> dict[str, Any] | None:
        """The event's JSON object, or None (no data, [DONE], or not JSON: passed through)."""
        if event.data is None or event.is_done:
            return None
        try:
            chunk = event.json()
        except ValueError:
            UPSTREAM_ERRORS.labels(kind="invalid_sse").inc()
            log.warning("upstream sent an event that is not JSON; passing it through")
            return None
        if not isinstance(chunk, dict):
            return None
        self._remember_template(chunk)
        return chunk

    def _remember_template(self, chunk: dict[str, Any]) -> None:
        if self.state.template:
            return
        self.state.template = {
            key: chunk[key] for key in ("id", "object", "created", "model", "system_fingerprint") if key in chunk
        }
        self.state.template.setdefault("object", "chat.completion.chunk")

    def _base_chunk(self) -> dict[str, Any]:
        base = dict(self.state.template) or {"object": "chat.completion.chunk"}
        base.setdefault("id", "chatcmpl-factcheck")
        base.setdefault("created", int(time.time()))
        base.setdefault("model", "unknown")
        return base

    def _content_chunk(self, text: str) -> dict[str, Any]:
        chunk = self._base_chunk()
        chunk["choices"] = [{"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}]
        return chunk

    def _factcheck_chunk(self, factcheck: dict[str, Any]) -> dict[str, Any]:
        chunk = self._base_chunk()
        chunk["choices"] = [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": None}]
        chunk["factcheck"] = factcheck
        return chunk

    def _mark_first_content(self) -> None:
        if self.state.first_content_at is None:
            self.state.first_content_at = time.perf_counter()
            TIME_TO_FIRST_TOKEN.labels(mode=self.mode.value).observe(self.state.first_content_at - self._started_at)

    @staticmethod
    def _error_out(exc: UpstreamError) -> Out:
        UPSTREAM_ERRORS.labels(kind=exc.kind).inc()
        return Out(payload=error_body(str(exc), "upstream_error", None, exc.kind))


async def _report_of(task: asyncio.Task[SentenceReport]) -> SentenceReport | None:
    """The check's report, or None when the check was cancelled or failed (its sentence then
    goes out as written). Waiting does not take on the check's cancellation."""
    await asyncio.wait([task])
    if task.cancelled() or task.exception() is not None:
        return None
    return task.result()


_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean(text: str) -> str:
    """``text`` with lone surrogates (JSON ``"\\ud800"`` from the upstream) as U+FFFD: the
    checker and the client get text that encodes."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _choice0(chunk: dict[str, Any]) -> dict[str, Any] | None:
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            return choice
    return None


def _content0(chunk: dict[str, Any] | None) -> str:
    choice = _choice0(chunk) if chunk is not None else None
    delta = choice.get("delta") if choice else None
    content = delta.get("content") if isinstance(delta, dict) else None
    return _clean(content) if isinstance(content, str) else ""


def _finish_reason0(chunk: dict[str, Any]) -> str | None:
    choice = _choice0(chunk)
    return choice.get("finish_reason") if choice else None


def _without_content0(chunk: dict[str, Any] | None) -> Out | None:
    """Correct mode: the chunk minus choice 0's content, or None if nothing else is in it."""
    assert chunk is not None
    stripped = copy.deepcopy(chunk)
    choice = _choice0(stripped)
    assert choice is not None
    del choice["delta"]["content"]
    keep = bool(choice["delta"]) or choice.get("finish_reason") is not None
    keep = keep or len(stripped["choices"]) > 1 or stripped.get("usage") is not None
    return Out(payload=stripped) if keep else None


async def _single(out: Out) -> AsyncIterator[Out]:
    yield out
