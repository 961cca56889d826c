"""The checked stream's own duties, whatever the face: the checker opens the request once,
when the answer starts; a whole answer's checks have the budget of the answer; closing the
request's session stops what it still runs."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable

from adapters.upstream import UpstreamStream
from middleware.chat.chunks import ChunkItem, UpstreamChunks
from middleware.chat.face_router import TypedEncoder
from middleware.chat.low_priority import low_priority
from middleware.chat.checked_stream import (CheckedStream, CheckedText, End, Forward, Rendered, TextSource,
                                            whole_answer_budget)
from middleware.chat.protocol import SentenceEvent, SummaryEvent
from middleware.checking import CheckRunner, CheckSession
from middleware.errors import UpstreamError
from middleware.interfaces import RequestChecks
from middleware.responses.events import ResponseEvents
from middleware.settings import CheckSettings
from middleware.sse import SSEEvent, split_events
from middleware.types import CheckContext, Mode, Sentence, SentenceReport
from tests.support.checkers import ScriptedChecker


class OpeningChecker(ScriptedChecker):
    """Records, in order, the requests it opened and the sentences it checked."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, object]] = []

    def open(self, context: CheckContext, closed_book: asyncio.Future[str | None] | None = None) -> RequestChecks:
        self.calls.append(("open", context.user_message))
        return super().open(context, closed_book)

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        self.calls.append(("check", context.previous))
        return await super().check(sentence, context)


async def test_a_checked_stream_opens_the_request_once_before_its_first_check():
    for mode in (Mode.ANNOTATE, Mode.CORRECT, Mode.OFF):
        checker = OpeningChecker()
        session = CheckRunner(checker, CheckSettings()).session(CheckContext(user_message="Tell me about Curie.",
                                                                             mode=mode))
        stream = CheckedStream(TextSource("Curie was born in 1867. She died in 1934."), session)
        [event async for event in stream.run()]
        # each sentence's check has the sentences before it; the request was opened once, first
        expected = [] if mode is Mode.OFF else [("open", "Tell me about Curie."), ("check", []),
                                                ("check", ["Curie was born in 1867."])]
        assert checker.calls == expected


async def test_checked_text_without_a_stream_opens_the_request_at_its_first_sentence():
    checker = OpeningChecker()
    session = CheckRunner(checker, CheckSettings()).session(CheckContext(user_message="Q?"))
    text = CheckedText(session)
    assert text.feed("Hello") == [] and checker.calls == []
    text.feed(" world. Curie was born in 1867. ")
    text.flush()
    await session.wait_all()
    assert [call[0] for call in checker.calls] == ["open", "check", "check"]


async def test_closing_a_session_cancels_its_checks_and_its_closed_book_call():
    session = CheckRunner(ScriptedChecker(delay=30), CheckSettings(sentence_budget_s=60)).session(
        CheckContext(), closed_book=asyncio.ensure_future(asyncio.sleep(30)))
    task = session.submit(Sentence(index=0, start=0, end=5, text="Text."), [])
    await asyncio.sleep(0.01)
    closed_book = session.closed_book
    session.close()
    await asyncio.gather(task, closed_book, return_exceptions=True)
    assert task.cancelled() and closed_book is not None and closed_book.cancelled()


def test_a_whole_answer_has_the_budget_of_its_waves_of_checks():
    settings = CheckSettings(sentence_budget_s=1.5, max_checks_per_stream=4)
    four = "One is here. Two is here. Three is here. Four is here."
    assert whole_answer_budget(settings, four) == 1.5
    assert whole_answer_budget(settings, four + " Five is here.") == 3.0
    assert whole_answer_budget(settings, "## A heading only\n") == 1.5


class ReadsSource(TextSource):
    """Items in reads: each read's items come at once, the reads 10 ms apart."""

    def __init__(self, reads: list[list[str]]) -> None:
        super().__init__("".join("".join(read) for read in reads))
        self._reads = reads

    async def items(self) -> AsyncIterator[str]:
        for read in self._reads:
            await asyncio.sleep(0.01)
            for item in read:
                yield item

    def ends_message(self, item: str) -> bool:
        return False


async def test_annotate_batches_hold_what_one_read_brought_and_run_flattens_them():
    reads = [["Curie was ", "born in 1867."], [" She ", "died ", "in 1934."]]

    async def events(batched: bool) -> list[object]:
        session = CheckRunner(ScriptedChecker(), CheckSettings()).session(CheckContext(mode=Mode.ANNOTATE))
        stream = CheckedStream(ReadsSource(reads), session)
        out = [batch async for batch in stream.batches()] if batched else [e async for e in stream.run()]
        session.close()
        return out

    batches = await events(batched=True)
    forwarded = [[e.item for e in batch if isinstance(e, Forward)] for batch in batches]
    assert [items for items in forwarded if items] == reads  # one batch a read
    flat = [type(e).__name__ for batch in batches for e in batch]
    assert flat == [type(e).__name__ for e in await events(batched=False)]
    assert flat.count("SentenceEvent") == 2 and flat[-2:] == ["SummaryEvent", "End"]


async def test_annotate_relays_a_stream_before_the_reading_for_checks_queued_ahead_of_it():
    """Under a burst the relay passes tokens on first: the stream's items all go out while
    earlier low-priority work (other streams' reading for checks) still waits; the stream's
    own sentences are read after that work, and every report still comes."""
    later = low_priority()
    backlog_done: list[bool] = []
    for _ in range(30):
        later.call(time.sleep, 0.002)  # 60 ms of other streams' reading, in 2 ms calls
    later.call(backlog_done.append, True)
    reads = [["Curie was ", "born in 1867."], [" She ", "died ", "in 1934."]]
    session = CheckRunner(ScriptedChecker(), CheckSettings()).session(CheckContext(mode=Mode.ANNOTATE))
    seen: list[tuple[str, bool]] = []
    async for event in CheckedStream(ReadsSource(reads), session).run():
        seen.append((type(event).__name__, bool(backlog_done)))
    session.close()
    assert [done for kind, done in seen if kind == "Forward"] == [False] * 5
    assert [done for kind, done in seen if kind == "SentenceEvent"] == [True, True]
    assert [kind for kind, _ in seen][-2:] == ["SummaryEvent", "End"]


async def test_an_abandoned_annotate_stream_drops_its_queued_reading():
    later = low_priority()
    for _ in range(10):
        later.call(time.sleep, 0.002)  # the reading waits behind this
    checker = ScriptedChecker()
    session = CheckRunner(checker, CheckSettings()).session(CheckContext(mode=Mode.ANNOTATE))
    events = CheckedStream(ReadsSource([["Curie was born in 1867.", " She died in 1934."]]), session).run()
    assert isinstance(await anext(events), Forward)
    await events.aclose()  # the client left before the text was read for checks
    await later.drained()
    session.close()
    assert checker.seen == [] and session.tasks == []


class ReadsUpstream(UpstreamStream):
    """An upstream whose body arrives in the given reads."""

    def __init__(self, reads: list[bytes]) -> None:
        super().__init__(response=None)  # type: ignore[arg-type]
        self.reads = reads

    async def chunks(self) -> AsyncIterator[bytes]:
        for read in self.reads:
            await asyncio.sleep(0)
            yield read

    def close(self) -> None:
        pass


def chunk_event(text: str) -> bytes:
    data = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


async def test_annotate_sends_reads_whole_and_holds_the_end_marker_that_shares_a_read():
    first = chunk_event("Curie was born ") + chunk_event("in 1867.")
    last = chunk_event(" She died in 1934.")
    reads = [first, last + b"data: [DONE]\n\n" + chunk_event(" Never read.")]
    session = CheckRunner(ScriptedChecker(), CheckSettings()).session(CheckContext(mode=Mode.ANNOTATE))
    events = [event async for event in CheckedStream(UpstreamChunks(ReadsUpstream(reads)), session).run()]
    session.close()
    kinds = [type(event).__name__ for event in events]
    assert kinds == ["Forward", "Forward", "SentenceEvent", "SentenceEvent", "SummaryEvent", "End"]
    assert [event.item.raw for event in events[:2]] == [first, last]  # the first read whole, the end held
    assert events[-1].item.raw == b"data: [DONE]\n\n"
    assert [event.report.text for event in events[2:4]] == ["Curie was born in 1867.", "She died in 1934."]


def test_a_read_is_split_into_its_events_and_the_end_test_never_misses():
    source = UpstreamChunks(ReadsUpstream([]))
    read = ChunkItem(raw=chunk_event("A [DONE] in the text.") + chunk_event("B"))
    assert source.may_end(read)  # a false "maybe" costs a split, never a missed end
    items = source.split(read)
    assert [source.text(item) for item in items] == ["A [DONE] in the text.", "B"]
    assert not any(source.is_end(item) for item in items)
    assert not source.may_end(ChunkItem(raw=chunk_event("B")))
    assert split_events(b"data: 1\r\n\r\ndata: 2") == [SSEEvent(raw=b"data: 1\r\n\r\n", data="1"),
                                                        SSEEvent(raw=b"data: 2", data="2")]


async def test_annotate_reports_and_summary_come_rendered_by_the_faces_renderer():
    reads = [["Curie was ", "born in 1867."], [" She ", "died ", "in 1934."]]
    session = CheckRunner(ScriptedChecker(), CheckSettings()).session(CheckContext(mode=Mode.ANNOTATE))

    def render(event: object) -> bytes:
        assert isinstance(event, SentenceEvent | SummaryEvent)
        return (event.report.text if isinstance(event, SentenceEvent) else "summary").encode()

    stream = CheckedStream(ReadsSource(reads), session)
    events = [event async for batch in stream.batches(render=render) for event in batch]
    session.close()
    rendered = [event.data for event in events if isinstance(event, Rendered)]
    assert rendered == [b"Curie was born in 1867.", b"She died in 1934.", b"summary"]
    assert not any(isinstance(event, SentenceEvent | SummaryEvent) for event in events)
    assert isinstance(events[-1], End) and isinstance(events[-2], Rendered)


def typed(sequence: int, kind: str, **fields: object) -> bytes:
    data = {"type": kind, "sequence_number": sequence, **fields}
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


def delta(sequence: int, text: str) -> bytes:
    return typed(sequence, "response.output_text.delta", delta=text, item_id="m", output_index=0, content_index=0)


class BacklogUpstream(UpstreamStream):
    """A Responses stream whose second read comes once the first sentence's check is done
    while the low-priority queue is busy with other streams' reading: the report waits there
    behind reads sent after it."""

    def __init__(self, session: CheckSession, fail: bool = False) -> None:
        super().__init__(response=None)  # type: ignore[arg-type]
        self.session = session
        self.fail = fail

    async def chunks(self) -> AsyncIterator[bytes]:
        yield delta(1, "Curie was born in 1867. She won a prize. ")
        while not self.session.tasks or not all(task.done() for task in self.session.tasks):
            await asyncio.sleep(0)
        for _ in range(20):
            low_priority().call(time.sleep, 0.002)  # other streams' reading
        yield delta(2, "She ") + delta(3, "died.")
        if self.fail:
            raise UpstreamError("upstream broke", kind="disconnect")
        await asyncio.sleep(0.05)
        yield typed(4, "response.completed", response={"output": []}) + delta(5, "after the end")


class FailsAsTheCheckEnds(UpstreamStream):
    """A Responses stream that breaks off in the same turn as the first sentence's check ends,
    before that check's done callbacks have run (they queue its report)."""

    def __init__(self, ended: asyncio.Event) -> None:
        super().__init__(response=None)  # type: ignore[arg-type]
        self.ended = ended

    async def chunks(self) -> AsyncIterator[bytes]:
        yield delta(1, "Curie was born in 1867. She won a prize. ")
        await self.ended.wait()
        raise UpstreamError("upstream broke", kind="disconnect")


class SignallingChecker(ScriptedChecker):
    """Sets ``ended`` just before each report is returned: a waiter wakes ahead of the task's
    done callbacks."""

    def __init__(self) -> None:
        super().__init__()
        self.ended = asyncio.Event()

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        report = await super().check(sentence, context)
        self.ended.set()
        return report


async def wire_of(
    upstream: Callable[[CheckSession, asyncio.Event], UpstreamStream],
) -> list[dict[str, object]]:
    """What the client receives of ``upstream(session, ended)``'s stream, annotated; ``ended``
    is set as each check ends."""
    checker = SignallingChecker()
    session = CheckRunner(checker, CheckSettings()).session(CheckContext(mode=Mode.ANNOTATE))
    source = ResponseEvents(upstream(session, checker.ended))
    encode = TypedEncoder(source).encode
    wire = b""
    async for batch in CheckedStream(source, session).batches(render=encode):
        wire += b"".join(event.data if isinstance(event, Rendered) else encode(event) for event in batch)
    session.close()
    return [json.loads(event.data or "") for event in split_events(wire)]


async def test_the_proxys_own_events_repeat_the_sequence_number_last_sent_under_a_backlog():
    events = await wire_of(lambda session, _: BacklogUpstream(session))
    last_sent = 0
    for event in events:
        if event["type"] in ("response.factcheck",):
            assert event["sequence_number"] == last_sent, events
        else:
            last_sent = event["sequence_number"]  # type: ignore[assignment]
    kinds = [event["type"] for event in events]
    assert kinds.count("response.factcheck") == 4  # three reports and the summary
    assert kinds[-1] == "response.completed" and "after the end" not in json.dumps(events)


async def test_an_upstream_failure_sends_the_reports_already_done_then_the_error_numbered_as_sent():
    events = await wire_of(lambda session, _: BacklogUpstream(session, fail=True))
    kinds = [event["type"] for event in events]
    assert kinds.count("response.factcheck") == 1  # the first sentence's check was done; nothing new after
    assert kinds[-1] == "error" and events[-1]["sequence_number"] == 3


async def test_a_report_done_in_the_turn_the_upstream_fails_is_sent(monkeypatch):
    """The check ended, and the upstream broke off before the check's done callback queued its
    report: the report still goes out before the error. It was lost when the failure waited
    for the low-priority queue to drain before that callback had run, and the queue's turn
    ended right after the wait's marker (here every turn runs one call; under load, a slice
    that ran out; CI caught it once)."""
    monkeypatch.setattr("middleware.chat.low_priority.SLICE_S", 0.0)
    events = await wire_of(lambda _, ended: FailsAsTheCheckEnds(ended))
    kinds = [event["type"] for event in events]
    assert kinds.count("response.factcheck") == 1 and kinds[-1] == "error", kinds
