"""One checked answer, whatever carries it: the modes and the sentence bookkeeping, once.

Every face (the SSE endpoint, the websocket, the LangChain Runnable and callback, ``factcheck
check``) reads an answer as items of its own kind (an upstream SSE event, a LangChain message
chunk) through an ``AnswerSource``, and gets back ``StreamEvent`` items to encode:

- ``Forward(item)``: an item of the answer, passed on as it came (correct mode: without its
  text, when something else is in it);
- ``Text(text)``: correct mode: a sentence's text as the client gets it (edited or as written);
- ``SentenceEvent`` / ``SummaryEvent`` (the protocol's ``factcheck`` events);
- ``BlockedEvent``: block mode stopped the answer at a sentence; ``End()`` follows, nothing else;
- ``Failed(error)``: the answer broke off; nothing follows;
- ``End(item)``: the answer is complete (``item``: the source's own end marker, if it sent one);
- ``Rendered(data)``: annotate mode, a report or the summary rendered by the face's renderer
  (``batches(render=...)``) as low-priority work.

Modes:
- off: items pass through as fast as the source gives them (``AnswerSource.passthrough``);
  no ``End`` (the end marker, if any, was an item like the others);
- annotate: items pass through at once, as in off mode (up to the end marker); they are read
  for checks beside the stream, as low-priority work (``low_priority``): the text is
  segmented and each sentence checked; each report goes out when it is ready; the summary
  ends it;
- correct: the text is held per sentence until its check finishes (bounded by the budget)
  and then sent, corrected where the checker edited it, followed by its report;
- block: held as in correct mode and sent as written; the first sentence judged
  contradictory (or extrapolatory, ``check.block_extrapolatory``) is not sent: a
  ``BlockedEvent`` with its report ends the answer, and the source is read no further (the
  face closes the upstream). A sentence left unverified (timeout, failure) is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from middleware.chat.low_priority import LowPriority, low_priority
from middleware.chat.protocol import BlockedEvent, BlockReason, SentenceEvent, SummaryEvent
from middleware.checking import CheckRunner, CheckSession
from middleware.metrics import BLOCKS, TIME_TO_FIRST_TOKEN
from middleware.text.answer_segmenter import StreamSegmenter, segment_text
from middleware.settings import CheckSettings
from middleware.types import CheckContext, Mode, Segment, Sentence, SentenceReport, StreamSummary

log = logging.getLogger(__name__)

T = TypeVar("T")


class AnswerSource(Protocol[T]):
    """An answer read once, as items of the face's own kind."""

    def items(self) -> AsyncIterator[T]:
        """The items, each one a unit the source can tell the text of (correct mode)."""
        ...

    def passthrough(self) -> AsyncIterator[T]:
        """The items as fast as they come, unread (off and annotate modes): an upstream's
        reads whole, cut only after their last whole event."""
        ...

    def split(self, item: T) -> list[T]:
        """The items (as ``items`` gives them) of a ``passthrough`` item; annotate mode reads
        what went out whole. A source that notes what was sent notes them here."""
        ...

    def may_end(self, item: T) -> bool:
        """A ``passthrough`` item may hold the end marker (a cheap test, never a false "no"):
        annotate mode then splits it before it goes out."""
        ...

    def text(self, item: T) -> str:
        """The answer text the item adds (choice 0's content), or ""."""
        ...

    def ends_message(self, item: T) -> bool:
        """The item closes the message (a finish reason): what is held is checked now."""
        ...

    def is_end(self, item: T) -> bool:
        """The item is the source's end marker (SSE ``[DONE]``); nothing after it is read."""
        ...

    def without_text(self, item: T) -> T | None:
        """Correct mode: the item minus its text, or None when nothing else is in it."""
        ...


@dataclass(frozen=True, slots=True)
class Forward(Generic[T]):
    item: T


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Failed:
    error: BaseException


@dataclass(frozen=True, slots=True)
class End(Generic[T]):
    item: T | None = None


@dataclass(frozen=True, slots=True)
class Rendered:
    """Annotate mode, when ``batches`` was given a renderer: a report or the summary as the
    face writes it, rendered as low-priority work."""

    data: bytes


StreamEvent = Forward[T] | Text | SentenceEvent | SummaryEvent | BlockedEvent | Failed | End[T]


def block_reason(report: SentenceReport, settings: CheckSettings) -> BlockReason | None:
    """The verdict that stops the answer at this sentence in block mode, or None."""
    label = report.verdict.label
    if label == "contradictory" or (label == "extrapolatory" and settings.block_extrapolatory):
        return label
    return None


@dataclass(slots=True)
class Held:
    """A segment of the message and, if it is a checkable sentence, its check."""

    segment: Segment
    task: asyncio.Future[SentenceReport] | None = None


class CheckedText:
    """The sentence bookkeeping of one message: ``feed`` text as it arrives and ``flush`` at
    the end; each checkable sentence is numbered, given the sentences before it as context and
    submitted at once to the request's ``CheckSession``. Every task resolves to a report (a
    timeout or a failure is an ``unverified`` report), recorded in the session as it finishes."""

    def __init__(self, session: CheckSession) -> None:
        self.session = session
        self.sentences: list[Sentence] = []
        self._segmenter = StreamSegmenter()

    @property
    def mode(self) -> Mode:
        return self.session.mode

    def feed(self, text: str) -> list[Held]:
        return [self._hold(segment) for segment in self._segmenter.feed(text)] if text else []

    def flush(self) -> list[Held]:
        return [self._hold(segment) for segment in self._segmenter.flush()]

    def _hold(self, segment: Segment) -> Held:
        if not segment.checkable:
            return Held(segment)
        sentence = Sentence(index=len(self.sentences), start=segment.start, end=segment.end, text=segment.text,
                            code_spans=segment.code_spans)
        self.sentences.append(sentence)
        previous = [s.text for s in self.sentences[: sentence.index]]
        return Held(segment, self.session.submit(sentence, previous))


class TextSource:
    """A complete text as an ``AnswerSource``: one item (a non-stream completion, ``factcheck check``)."""

    def __init__(self, text: str) -> None:
        self._text = text

    async def items(self) -> AsyncIterator[str]:
        yield self._text

    def passthrough(self) -> AsyncIterator[str]:
        return self.items()

    def split(self, item: str) -> list[str]:
        return [item]

    def may_end(self, item: str) -> bool:
        return False

    def text(self, item: str) -> str:
        return item

    def ends_message(self, item: str) -> bool:
        return True

    def is_end(self, item: str) -> bool:
        return False

    def without_text(self, item: str) -> str | None:
        return None


@dataclass(slots=True)
class CheckedAnswer:
    """A complete answer after its check: the text the client gets (correct mode: edited;
    block mode: up to the sentence that stopped it), the reports in sentence order (block
    mode: up to that sentence's) and the summary (None in off mode); ``blocked``: block mode
    stopped the answer."""

    text: str
    reports: list[SentenceReport]
    summary: StreamSummary | None
    blocked: BlockedEvent | None = None


def whole_answer_budget(settings: CheckSettings, text: str) -> float:
    """Each check's budget when a complete answer is checked at once: the per-sentence budget
    for every wave of ``max_checks_per_stream`` sentences. All its sentences are submitted
    together, so they wait for the answer's check slots and share the CPU, where a streamed
    answer's sentences arrive one by one; with the per-sentence budget alone a non-stream
    answer's sentences timed out (and its attribution report was empty) on a busy machine.
    The answer still waits at most as long as if each wave had taken its whole budget."""
    sentences = sum(1 for segment in segment_text(text) if segment.checkable)
    return settings.sentence_budget_s * max(1, math.ceil(sentences / settings.max_checks_per_stream))


async def check_answer(runner: CheckRunner, text: str, context: CheckContext,
                       closed_book: asyncio.Future[str | None] | None = None) -> CheckedAnswer:
    """Check a complete text through the same checked stream as a streamed answer, with the
    budget of a whole answer (``whole_answer_budget``)."""
    out: list[str] = []
    reports: list[SentenceReport] = []
    summary = None
    blocked = None
    session = runner.session(context, closed_book, budget_s=whole_answer_budget(runner.settings, text))
    checked = CheckedStream(TextSource(text), session)
    try:
        async for event in checked.run():
            if isinstance(event, Forward | Text):
                out.append(event.item if isinstance(event, Forward) else event.text)
            elif isinstance(event, SentenceEvent):
                reports.append(event.report)
            elif isinstance(event, SummaryEvent):
                summary = event.summary
            elif isinstance(event, BlockedEvent):
                blocked, summary = event, event.summary
                reports.append(event.report)
            elif isinstance(event, Failed):
                raise event.error
    finally:
        session.close()
    return CheckedAnswer("".join(out), sorted(reports, key=lambda r: r.index), summary, blocked)


@dataclass(slots=True)
class _Release:
    """Correct mode's ordered output: a held sentence, or an event to pass on in its place."""

    held: Held | None = None
    event: Any = None


class CheckedStream(Generic[T]):
    """One answer from ``source`` checked in its request's ``CheckSession`` (in the
    request's mode). ``run()`` is read once; stopping early (or cancelling the reader) cancels
    the pending checks. The session's owner closes it."""

    def __init__(self, source: AnswerSource[T], session: CheckSession, started_at: float | None = None) -> None:
        self.source = source
        self.session = session
        self.mode = session.mode
        self.text = CheckedText(session)
        self.started_at = started_at if started_at is not None else time.perf_counter()
        self.first_content_at: float | None = None
        self.answer_done_at: float | None = None
        self._end: T | None = None
        self._render: Callable[[StreamEvent[T]], bytes] | None = None
        self._later: LowPriority | None = None
        """Annotate mode: the event loop's low-priority queue (looked up once per stream)."""
        self._unread: deque[T | list[T]] = deque()
        """Annotate mode: reads sent and not yet read for checks, oldest first."""
        self._checking = True
        """Annotate mode: reading submits checks (off once the upstream failed)."""
        self._stopped = False
        """The stream was stopped (read to its end or abandoned): its queued reading is dropped."""
        self.blocked: BlockedEvent | None = None
        """Block mode: the event that stopped the answer."""

    async def run(self) -> AsyncIterator[StreamEvent[T]]:
        """The stream's events, one at a time (``batches``, flattened); closing it closes
        ``batches`` at once (its checks and queued reading stop then, not when collected)."""
        async with contextlib.aclosing(self.batches()) as batches:
            async for batch in batches:
                for event in batch:
                    assert not isinstance(event, Rendered)  # only a renderer makes them
                    yield event

    async def batches(self, render: Callable[[StreamEvent[T]], bytes] | None = None,
                      ) -> AsyncGenerator[list[StreamEvent[T] | Rendered], None]:
        """The stream's events, each list holding what is ready at once. In annotate mode
        that is the events of one upstream read with the reports that finished meanwhile: a
        relay writes each list in one write, so that a busy relay, which reads several events
        a read, does not pay a write (a system call, which on loopback also delivers) for
        every token. Off mode's items are whole reads already; correct mode's events wait for
        their checks, so each goes out alone. ``render``: annotate mode's reports and summary
        come as ``Rendered`` by it, rendered as low-priority work (``low_priority``), behind
        the reading of what went out before them. Block mode reads as correct mode does."""
        self._render = render
        try:
            if self.mode is Mode.OFF:
                async for event in self._off():
                    yield [event]
                return
            self.session.start()  # while the source's first sentence is on its way
            if self.mode is Mode.ANNOTATE:
                batches = self._drain(self._annotate)
            else:
                batches = self._drain(self._correct, self._release)
            async for batch in batches:
                yield batch
        finally:
            self._stopped = True
            await self.session.cancel()

    # ------------------------------------------------------------------ modes
    async def _off(self) -> AsyncIterator[StreamEvent[T]]:
        try:
            async for item in self.source.passthrough():
                self._mark_first_content()
                yield Forward(item)
        except Exception as exc:  # the source broke off: the face says so in its own way
            yield Failed(exc)
        self.answer_done_at = time.perf_counter()

    async def _answer_items(self) -> AsyncIterator[T]:
        """The source's items up to its end marker (kept in ``self._end``)."""
        async for item in self.source.items():
            if self.source.is_end(item):
                self._end = item
                return
            yield item

    async def _annotate(self, queue: asyncio.Queue[Any]) -> None:
        """Annotate mode: each upstream read goes out whole and at once, as in off mode, and
        is read for checks (split into items, its text segmented, its sentences submitted)
        later, as low-priority work (``low_priority``), in order. Reports and the summary go
        out through the same queue; before one is put out, every read sent before it is
        read, so that whatever the source notes as it reads (the Responses API's sequence
        number) is up to date with what went out. Under a burst the relay thus passes on
        every stream's tokens, and starts new streams, before it reads for checks. A read
        that may hold the source's end marker is split at once: the end waits for the
        summary, and nothing after it is read."""
        later = self._later = low_priority()
        try:
            async for read in self.source.passthrough():
                self._mark_first_content()
                if self.source.may_end(read):
                    items = self._until_end(self.source.split(read))
                    for item in items:
                        queue.put_nowait(Forward(item))
                    self._sent(items, queue)
                    if self._end is not None:
                        break
                else:
                    queue.put_nowait(Forward(read))
                    self._sent(read, queue)
        except Exception as exc:
            # Checks that finished go out, what was sent is read (noted) without new checks,
            # then the failure ends the stream.
            self._checking = False
            await self.session.cancel()
            # a check that ended in this turn has its done callback (which queues its report)
            # still waiting in the loop's ready queue: let it run before the drain's marker is
            # queued, or the report may be queued after the marker and lost
            await asyncio.sleep(0)
            await later.drained()
            self._catch_up(queue)
            queue.put_nowait(Failed(exc))
            queue.put_nowait(None)
            return
        self.answer_done_at = time.perf_counter()
        await later.run(self._read_rest, queue)
        await self.session.wait_all()
        await later.drained()  # the reports, queued there by their callbacks, are out before the summary
        summary = SummaryEvent(summary=await self.session.summary(self._added_ms()))
        await later.run(self._queue_own, summary, queue)
        queue.put_nowait(End(self._end))
        queue.put_nowait(None)

    def _until_end(self, items: list[T]) -> list[T]:
        """The items before the source's end marker (kept in ``self._end``)."""
        for at, item in enumerate(items):
            if self.source.is_end(item):
                self._end = item
                return items[:at]
        return items

    def _sent(self, read: T | list[T], queue: asyncio.Queue[Any]) -> None:
        """A read (or the items it was split into) went out: read it for checks later."""
        self._unread.append(read)
        assert self._later is not None
        self._later.call(self._read_next, queue)

    def _read_next(self, queue: asyncio.Queue[Any]) -> None:
        if self._unread and not self._stopped:
            self._read(self._unread.popleft(), queue)

    def _catch_up(self, queue: asyncio.Queue[Any]) -> None:
        """Read every read sent and not read yet."""
        while self._unread and not self._stopped:
            self._read(self._unread.popleft(), queue)

    def _read_rest(self, queue: asyncio.Queue[Any]) -> None:
        """The answer ended: the reads not read yet, then what the segmenter holds."""
        self._catch_up(queue)
        if not self._stopped:
            self._report_when_done(self.text.flush(), queue)

    def _read(self, read: T | list[T], queue: asyncio.Queue[Any]) -> None:
        """A read's items (split here unless they were), their text segmented and its
        sentences submitted, each report sent when done; once ``_checking`` is off (the
        upstream failed) the split alone, for what the source notes."""
        items = read if isinstance(read, list) else self.source.split(read)
        if not self._checking:
            return
        for item in items:
            if text := self.source.text(item):
                self._report_when_done(self.text.feed(text), queue)

    def _report_when_done(self, held: list[Held], queue: asyncio.Queue[Any]) -> None:
        """Each check's report into ``queue`` when it is done, as low-priority work
        (``_queue_own``)."""
        later = self._later
        assert later is not None

        def on_done(task: asyncio.Future[SentenceReport]) -> None:
            if not task.cancelled() and task.exception() is None:
                later.call(self._queue_own, SentenceEvent(report=task.result()), queue)

        for item in held:
            if item.task is not None:
                item.task.add_done_callback(on_done)

    def _queue_own(self, event: SentenceEvent | SummaryEvent, queue: asyncio.Queue[Any]) -> None:
        """Annotate mode: a report or the summary into ``queue`` after the reads sent before
        it were read, rendered if a renderer was given; nothing once the stream has stopped."""
        if self._stopped:
            return
        self._catch_up(queue)
        queue.put_nowait(Rendered(self._render(event)) if self._render is not None else event)

    async def _correct(self, queue: asyncio.Queue[Any]) -> None:
        try:
            async for item in self._answer_items():
                text = self.source.text(item)
                rest: T | None = item
                if text:
                    self._hold_all(self.text.feed(text), queue)
                    rest = self.source.without_text(item)
                if self.source.ends_message(item):
                    self._hold_all(self.text.flush(), queue)
                if rest is not None:
                    queue.put_nowait(_Release(event=Forward(rest)))
        except Exception as exc:
            # Nothing held is lost: the rest is checked (within the budget) and sent with its
            # report like any sentence, then the failure ends the stream.
            self._hold_all(self.text.flush(), queue)
            queue.put_nowait(_Release(event=Failed(exc)))
            queue.put_nowait(None)
            return
        self.answer_done_at = time.perf_counter()
        self._hold_all(self.text.flush(), queue)
        await self.session.wait_all()
        await self._close(queue, lambda event: _Release(event=event))

    @staticmethod
    def _hold_all(held: list[Held], queue: asyncio.Queue[Any]) -> None:
        for item in held:
            queue.put_nowait(_Release(held=item))

    async def _release(self, release: _Release) -> AsyncIterator[StreamEvent[T]]:
        """Correct and block mode: one ordered item, waiting for its check if it has one."""
        if release.held is None:
            yield release.event
            return
        held = release.held
        report = await _report_of(held.task) if held.task is not None else None
        if self.mode is Mode.BLOCK:
            if report is not None and (reason := block_reason(report, self.session.runner.settings)) is not None:
                yield await self._block(report, reason)
                yield End()
                return
            text = held.segment.text
        elif report is not None and report.corrected_text is not None:
            text = report.corrected_text
        else:
            text = held.segment.text
        if text:
            self._mark_first_content()
            yield Text(text)
        if report is not None:
            yield SentenceEvent(report=report)

    async def _block(self, report: SentenceReport, reason: BlockReason) -> BlockedEvent:
        """Block mode: the answer stops at ``report``'s sentence. The checks still running are
        cancelled; the summary is that of the sentences up to it (those the client received,
        and this one). Counted in ``factcheck_blocks_total``."""
        await self.session.cancel()
        reports = [r for r in self.session.reports if r.index <= report.index]
        summary = await self.session.summary(self._added_ms(), reports)
        BLOCKS.labels(verdict=reason).inc()
        self.blocked = BlockedEvent(reason=reason, report=report, summary=summary)
        return self.blocked

    async def _close(self, queue: asyncio.Queue[Any], wrap: Callable[[Any], Any]) -> None:
        """The summary, then the end (the source's own marker when it sent one)."""
        queue.put_nowait(wrap(SummaryEvent(summary=await self.session.summary(self._added_ms()))))
        queue.put_nowait(wrap(End(self._end)))
        queue.put_nowait(None)

    def _added_ms(self) -> float | None:
        """What the check adds after the answer: the time since the answer ended."""
        return (time.perf_counter() - self.answer_done_at) * 1000.0 if self.answer_done_at is not None else None

    # ------------------------------------------------------------------ plumbing
    async def _drain(
        self, reader: Callable[[asyncio.Queue[Any]], Coroutine[Any, Any, None]],
        expand: Callable[[Any], AsyncIterator[StreamEvent[T]]] | None = None,
    ) -> AsyncIterator[list[StreamEvent[T] | Rendered]]:
        """Run ``reader`` (filling a queue until it puts None) and yield what the queued items
        expand to: with ``expand``, each event it makes alone; without, the items themselves
        (annotate mode's every token), all those queued at once in one list, with no generator
        made per item. Stopping early cancels the reader. A reader that fails in a way it did
        not handle still ends the stream: with ``Failed``, not a hang."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        task = asyncio.create_task(reader(queue))
        task.add_done_callback(lambda t: self._on_reader_done(t, queue))
        try:
            while (item := await queue.get()) is not None:
                if expand is not None:
                    async for event in expand(item):
                        yield [event]
                    if self.blocked is not None:  # block mode stopped the answer: the reader is cancelled
                        return
                    continue
                batch = [item]
                while not queue.empty():
                    if (item := queue.get_nowait()) is None:
                        yield batch
                        return
                    batch.append(item)
                yield batch
        finally:
            if not task.done():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _on_reader_done(self, task: asyncio.Task[None], queue: asyncio.Queue[Any]) -> None:
        if task.cancelled() or (error := task.exception()) is None:
            return
        log.error("stream reader failed", exc_info=error)
        queue.put_nowait(Failed(error) if self.mode is Mode.ANNOTATE else _Release(event=Failed(error)))
        queue.put_nowait(None)

    def _mark_first_content(self) -> None:
        if self.first_content_at is None:
            self.first_content_at = time.perf_counter()
            TIME_TO_FIRST_TOKEN.labels(mode=self.mode.value).observe(self.first_content_at - self.started_at)


async def _report_of(task: asyncio.Future[SentenceReport]) -> SentenceReport | None:
    """The check's report, or None when the check was cancelled or failed (its sentence then
    goes out as written). Waiting does not take on the check's cancellation."""
    await asyncio.wait([task])
    if task.cancelled() or task.exception() is not None:
        return None
    return task.result()
