"""Property tests (hypothesis) of what reads untrusted input: the SSE parser (upstream
bytes), the request schema (client bodies), and the segmenter as the stream drives it
(segmenter-only properties are in text/test_answer_segmenter.py)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from middleware.checking import CheckRunner
from middleware.errors import RequestError
from middleware.text.answer_segmenter import segment_text
from middleware.chat.api_router import SSEEncoder
from middleware.chat.checked_stream import CheckedStream
from middleware.chat.chunks import UpstreamChunks
from middleware.chat.parsing import parse_chat_request, resolve_mode
from middleware.settings import CheckSettings
from middleware.sse import EventCutter, EventTooLarge, SSEEvent, SSEParser, encode_event, split_events
from middleware.types import CheckContext, Mode, SentenceReport
from tests.support.checkers import ScriptedChecker
from tests.middleware.text.test_answer_segmenter import markdownish, split_at

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STREAMED = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def split_bytes(blob: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(blob)]
    return [blob[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


# --- SSE parser ----------------------------------------------------------------------------

_VALUE = st.text(alphabet=st.characters(exclude_characters="\r\n", exclude_categories=["Cs"]), max_size=24)
_LINE = st.one_of(
    st.tuples(st.just("data"), _VALUE),
    st.tuples(st.just("event"), _VALUE),
    st.tuples(st.just("id"), _VALUE),
    st.tuples(st.just(""), _VALUE),  # a comment
)


@st.composite
def sse_event(draw: st.DrawFn) -> tuple[bytes, str | None, str | None]:
    """One well-formed event: its bytes, its expected data and event name. One line ending
    per event, so a CR is never followed by an LF that belongs to another ending."""
    lines = draw(st.lists(_LINE, min_size=1, max_size=5))
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    spaced = draw(st.booleans())
    text = "".join((f":{v}" if f == "" else f"{f}:{' ' if spaced else ''}{v}") + end for f, v in lines) + end

    def value(v: str) -> str:  # a single space after the colon is not part of the value
        return v if spaced else v.removeprefix(" ")

    data = [value(v) for f, v in lines if f == "data"]
    names = [value(v) for f, v in lines if f == "event"]
    return text.encode(), ("\n".join(data) if data else None), (names[-1] if names else None)


sse_stream = st.lists(sse_event(), min_size=1, max_size=8)


def parse_all(chunks: list[bytes], parser: SSEParser | None = None) -> list[SSEEvent]:
    parser = parser or SSEParser()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    return events + parser.flush()


@FUZZ
@given(stream=sse_stream)
def test_sse_events_decode_as_written(stream):
    blob = b"".join(raw for raw, _, _ in stream)
    events = parse_all([blob])
    assert [(e.raw, e.data, e.event) for e in events] == list(stream)
    assert b"".join(e.raw for e in events) == blob  # raw bytes round-trip


@FUZZ
@given(stream=sse_stream, data=st.data())
def test_sse_any_byte_split_gives_the_same_events(stream, data):
    blob = b"".join(raw for raw, _, _ in stream)
    cuts = data.draw(st.lists(st.integers(0, len(blob)), max_size=24))
    whole = parse_all([blob])
    assert parse_all(split_bytes(blob, cuts)) == whole
    assert parse_all([bytes([b]) for b in blob]) == whole


@FUZZ
@given(blob=st.binary(max_size=600), data=st.data())
@example(blob=b"data: x\r", data=None)
@example(blob=b"\r\n\r\n\r\r\n\n", data=None)
def test_sse_arbitrary_bytes_never_raise_and_keep_every_byte(blob, data):
    cuts = data.draw(st.lists(st.integers(0, len(blob)), max_size=24)) if data is not None else []
    events = parse_all(split_bytes(blob, cuts))
    joined = b"".join(e.raw for e in events)
    assert blob.startswith(joined) and not blob[len(joined):].strip()  # only trailing blank bytes dropped
    for event in events:
        assert event.data is None or isinstance(event.data, str)


@FUZZ
@given(stream=sse_stream, tail=st.sampled_from([b"", b"\n", b"\n\n\n", b"data: unterminated", b": c\n"]),
       blob=st.binary(max_size=200))
def test_splitting_a_read_gives_the_parsers_events(stream, tail, blob):
    """``split_events`` (a fast path for LF-only reads) reads what the parser reads."""
    for data in (b"".join(raw for raw, _, _ in stream) + tail, blob):
        assert split_events(data) == parse_all([data], SSEParser(max_event_bytes=len(data) + 1))


@FUZZ
@given(blob=st.binary(min_size=1, max_size=400), data=st.data())
def test_sse_size_limit_is_the_only_error(blob, data):
    parser = SSEParser(max_event_bytes=64)
    try:
        parse_all(split_bytes(blob, data.draw(st.lists(st.integers(0, len(blob)), max_size=8))), parser)
    except ValueError as exc:
        assert "larger than 64 bytes" in str(exc)


def cut_all(chunks: list[bytes], cutter: EventCutter | None = None) -> tuple[list[bytes], bytes]:
    cutter = cutter or EventCutter()
    return [cutter.feed(chunk) for chunk in chunks], cutter.flush()


@FUZZ
@given(stream=sse_stream, data=st.data())
def test_byte_pipe_keeps_every_byte_and_cuts_only_at_event_ends(stream, data):
    blob = b"".join(raw for raw, _, _ in stream)
    chunks = split_bytes(blob, data.draw(st.lists(st.integers(0, len(blob)), max_size=24)))
    pieces, rest = cut_all(chunks)
    assert b"".join(pieces) + rest == blob
    # every generated event is complete; only a last one ending in CR waits (an LF may follow)
    assert rest in (b"", stream[-1][0]) and (not rest or rest.endswith(b"\r"))
    event_ends = set(itertools.accumulate(len(raw) for raw, _, _ in stream))
    sent = 0
    for piece in pieces:
        sent += len(piece)
        assert sent == 0 or sent in event_ends  # the client only ever holds whole events


def test_byte_pipe_passes_whole_reads_through_uncopied():
    chunk = b'data: {"a":1}\n\ndata: {"b":2}\n\n'
    assert EventCutter().feed(chunk) is chunk


def test_byte_pipe_holds_a_partial_event_and_releases_it_at_the_end():
    cutter = EventCutter()
    assert cutter.feed(b"data: 1\n\ndata: 2") == b"data: 1\n\n"
    assert cutter.feed(b"\n") == b""
    assert cutter.feed(b"\ndata: 3") == b"data: 2\n\n"
    assert cutter.flush() == b"data: 3"


def test_byte_pipe_waits_for_the_lf_after_a_trailing_cr():
    cutter = EventCutter()
    assert cutter.feed(b"data: 1\r\n\r") == b""
    assert cutter.feed(b"\ndata: 2\r\r") == b"data: 1\r\n\r\n"
    assert cutter.flush() == b"data: 2\r\r"


def test_byte_pipe_refuses_an_oversized_event_and_sends_none_of_it():
    cutter = EventCutter(max_event_bytes=16)
    assert cutter.feed(b"data: 1\n\ndata: 1") == b"data: 1\n\n"
    with pytest.raises(EventTooLarge, match="larger than 16 bytes"):
        cutter.feed(b"2345678901")  # unfinished and past the limit
    with pytest.raises(EventTooLarge):  # finished in one read, but past the limit
        EventCutter(max_event_bytes=16).feed(b"data: 1\n\ndata: 12345678901234\n\n")
    cutter = EventCutter(max_event_bytes=16)  # whole events, then an unfinished one past the limit, in one read
    assert cutter.feed(b"data: 1\n\ndata: 12345678901234") == b"data: 1\n\n"  # the whole events go first
    with pytest.raises(EventTooLarge):
        cutter.flush()
    with pytest.raises(EventTooLarge):
        parser = SSEParser(max_event_bytes=16)
        assert [e.data for e in parser.feed(b"data: 1\n\ndata: 12345678901234\n\n")] == ["1"]  # the events before it
        parser.feed(b"")


# --- request schema --------------------------------------------------------------------------

json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=16,
)
_MODES = st.sampled_from(["off", "annotate", "correct"])
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"])},
    optional={
        "content": st.one_of(st.none(), st.text(max_size=40),
                             st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=20)}),
                                      max_size=3)),
        "name": st.text(max_size=8),
    },
)
factcheck = st.one_of(
    _MODES,
    st.fixed_dictionaries({}, optional={
        "mode": _MODES,
        "context": st.lists(st.one_of(st.text(max_size=20), st.fixed_dictionaries({"text": st.text(max_size=20)})),
                            max_size=2),
        "context_policy": st.sampled_from(["only", "first", "among"]),
        "memory_check": st.booleans(),
    }),
)
_RESERVED = {"model", "messages", "stream", "factcheck"}
extras = st.dictionaries(st.text(max_size=12).filter(lambda k: k not in _RESERVED), json_value, max_size=4)


@st.composite
def valid_request(draw: st.DrawFn) -> dict[str, Any]:
    body = {"messages": draw(st.lists(message, min_size=1, max_size=4)), **draw(extras)}
    if draw(st.booleans()):
        body["model"] = draw(st.text(max_size=12))
    if draw(st.booleans()):
        body["stream"] = draw(st.booleans())
    if draw(st.booleans()):
        body["factcheck"] = draw(factcheck)
    return body


hostile_request = st.one_of(
    json_value,
    st.dictionaries(st.sampled_from(sorted(_RESERVED)) | st.text(max_size=6), json_value, max_size=5),
    valid_request().flatmap(lambda b: st.fixed_dictionaries({k: st.one_of(st.just(v), json_value) for k, v in b.items()})),
)


@FUZZ
@given(body=hostile_request)
def test_request_parsing_raises_only_request_errors(body):
    try:
        request, forward = parse_chat_request(json.dumps(body).encode(), max_messages=3)
    except RequestError as exc:
        assert 400 <= exc.status < 500 and str(exc)
        assert set(exc.body()["error"]) == {"message", "type", "param", "code"}
        return
    assert "factcheck" not in forward and request.messages


@FUZZ
@given(raw=st.binary(max_size=200))
def test_request_parsing_of_arbitrary_bytes(raw):
    try:
        parse_chat_request(raw, max_messages=256)
    except RequestError:
        pass


@FUZZ
@given(body=valid_request(), header=st.none() | _MODES)
def test_valid_requests_forward_every_other_field_unchanged(body, header):
    request, forward = parse_chat_request(json.dumps(body).encode(), max_messages=256)
    assert forward == {k: v for k, v in body.items() if k != "factcheck"}
    assert json.loads(json.dumps(forward)) == forward
    mode = resolve_mode(request, header, Mode.ANNOTATE)
    fc = body.get("factcheck")
    named = fc if isinstance(fc, str) else (fc or {}).get("mode")
    assert mode is Mode(named or header or "annotate")


@pytest.mark.parametrize("depth", [1_000, 5_000, 200_000])
def test_deeply_nested_body_is_a_request_error(depth):
    with pytest.raises(RequestError) as info:
        parse_chat_request(b'{"messages": [{"role": "user", "content": "q"}], "x": ' + b"[" * depth + b"]" * depth + b"}", 256)
    assert info.value.status == 400


async def test_deeply_nested_bodies_never_get_a_5xx(make_proxy):
    proxy = await make_proxy()
    async with aiohttp.ClientSession() as session:
        for depth in (200, 800, 900, 950, 970, 990, 1_000, 1_100, 50_000):
            nested = b"[" * depth + b"]" * depth
            for raw in (b'{"messages": [{"role": "user", "content": "q"}], "mock": {"text": "Hi."}, "x": ' + nested + b"}",
                        b'{"messages": [{"role": "user", "content": ' + nested + b"}]}"):
                async with session.post(f"{proxy.url}/chat/completions", data=raw,
                                        headers={"Content-Type": "application/json"}) as response:
                    assert response.status < 500, (depth, await response.text())


# --- the segmenter as the stream drives it ----------------------------------------------------


def upstream_events(deltas: list[str]) -> list[SSEEvent]:
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    chunks = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    chunks += [{**head, "choices": [{"index": 0, "delta": {"content": d}, "finish_reason": None}]} for d in deltas]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return SSEParser().feed(b"".join(encode_event(c) for c in chunks) + b"data: [DONE]\n\n")


class ListUpstream:
    """An upstream stream replaying parsed events (or, in off mode, their bytes)."""

    def __init__(self, events: list[SSEEvent]) -> None:
        self._events = events

    async def events(self) -> AsyncIterator[SSEEvent]:
        for event in self._events:
            yield event

    async def chunks(self) -> AsyncIterator[bytes]:
        for event in self._events:
            yield event.raw

    def close(self) -> None:
        pass


def run_stream(deltas: list[str], mode: Mode, fixes: dict[str, str] | None = None) -> tuple[str, list[Any]]:
    """Content the client receives and its factcheck objects, in order."""

    async def go() -> list[Any]:
        runner = CheckRunner(ScriptedChecker(fixes), CheckSettings(sentence_budget_s=30))
        source = UpstreamChunks(ListUpstream(upstream_events(deltas)))
        encoder = SSEEncoder(source)
        return [encoder.encode(event) async for event in CheckedStream(source, runner.session(CheckContext(mode=mode))).run()]

    content, factcheck = [], []
    for raw in asyncio.run(go()):
        if raw == b"data: [DONE]\n\n":
            factcheck.append("DONE")
            continue
        chunk = json.loads(raw.decode()[len("data: "):])
        for choice in chunk.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content") or ""
            content.append(piece)
            if piece:
                factcheck.append(("content", len("".join(content))))
        if "factcheck" in chunk:
            factcheck.append(chunk["factcheck"])
    return "".join(content), factcheck


def apply_corrections(text: str, reports: list[SentenceReport]) -> str:
    """The oracle: each corrected sentence's span replaced by its corrected text."""
    out, cursor = [], 0
    for report in sorted(reports, key=lambda r: r.start):
        if report.corrected_text is not None:
            out += [text[cursor:report.start], report.corrected_text]
            cursor = report.end
    return "".join(out) + text[cursor:]


def expected_sentences(text: str) -> list[tuple[int, int, str]]:
    return [(s.start, s.end, s.text) for s in segment_text(text) if s.checkable]


streamed_text = st.one_of(markdownish, st.text(max_size=120))


@STREAMED
@given(text=streamed_text, data=st.data(), mode=st.sampled_from([Mode.ANNOTATE, Mode.CORRECT]))
def test_stream_checks_the_same_sentences_for_any_split(text, data, mode):
    deltas = split_at(text, data.draw(st.lists(st.integers(0, len(text)), max_size=20)))
    content, items = run_stream(deltas, mode)
    assert content == text
    reports = [i["report"] for i in items if isinstance(i, dict) and i["type"] == "sentence"]
    got = sorted((r["start"], r["end"], r["text"]) for r in reports)
    assert got == expected_sentences(text)
    assert items[-1] == "DONE" and items[-2]["type"] == "summary" and items[-2]["summary"]["sentences"] == len(got)
    if mode is Mode.CORRECT:  # reports in sentence order, each after its sentence's text
        assert [r["index"] for r in reports] == sorted(r["index"] for r in reports)
        for position, item in enumerate(items):
            if isinstance(item, dict) and item["type"] == "sentence":
                sent = max((n for kind, n in (i for i in items[:position] if isinstance(i, tuple))), default=0)
                assert sent >= item["report"]["end"]


@STREAMED
@given(text=markdownish, data=st.data())
def test_streamed_corrections_equal_the_whole_text_corrections(text, data):
    deltas = split_at(text, data.draw(st.lists(st.integers(0, len(text)), max_size=20)))
    fixes = {"the": "THE", "1990": "1991"}
    content, items = run_stream(deltas, Mode.CORRECT, fixes)
    reports = [SentenceReport.model_validate(i["report"]) for i in items if isinstance(i, dict) and i["type"] == "sentence"]
    assert content == apply_corrections(text, reports)
    for report in reports:
        assert text[report.start:report.end] == report.text  # reports keep the original text and offsets
