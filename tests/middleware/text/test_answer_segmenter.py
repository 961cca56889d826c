"""Stream segmenter: table of tricky texts, streaming determinism and tiling properties."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from middleware.text.answer_segmenter import StreamSegmenter, segment_text
from middleware.types import Segment, SegmentKind
from tests.support.segmenter_cases import CASES

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def stream(deltas: list[str]) -> list[Segment]:
    seg = StreamSegmenter()
    out: list[Segment] = []
    for d in deltas:
        out += seg.feed(d)
    out += seg.flush()
    assert seg.text == "".join(deltas)
    return out


def key(segments: list[Segment]) -> list[tuple[object, ...]]:
    return [(s.index, s.start, s.end, s.text, s.kind, tuple(s.code_spans)) for s in segments]


def split_at(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted(set(cuts)), len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def assert_tiles(text: str, segments: list[Segment]) -> None:
    assert "".join(s.text for s in segments) == text
    pos = 0
    for i, s in enumerate(segments):
        assert s.index == i
        assert s.start == pos and s.end > s.start, s
        assert text[s.start : s.end] == s.text
        if s.kind is SegmentKind.SENTENCE:
            assert not s.text[0].isspace() and not s.text[-1].isspace(), s
        if s.kind is SegmentKind.SPACE:
            assert i == 0 or segments[i - 1].kind is not SegmentKind.SPACE, "adjacent SPACE segments"
        for a, b in s.code_spans:
            assert s.start <= a < b <= s.end and text[a] == "`" and text[b - 1] == "`"
        pos = s.end
    assert pos == len(text)


# ---------------------------------------------------------------------------- table
@pytest.mark.parametrize(("text", "expected"), CASES, ids=[repr(c[0][:40]) for c in CASES])
def test_case_table(text: str, expected: list[tuple[str, str]]) -> None:
    whole = segment_text(text)
    assert [(s.kind.value, s.text) for s in whole] == expected
    assert_tiles(text, whole)
    assert key(stream(list(text))) == key(whole), "char-by-char feed differs"


def test_table_is_large_enough() -> None:
    assert len(CASES) >= 100


# ---------------------------------------------------------------------------- specific behaviour
def test_inline_code_spans_are_message_offsets() -> None:
    text = "Intro. Use `x.y()` and ``a`b`` here. Done."
    segs = [s for s in segment_text(text) if s.kind is SegmentKind.SENTENCE]
    assert [text[a:b] for a, b in segs[1].code_spans] == ["`x.y()`", "``a`b``"]
    assert segs[0].code_spans == [] and segs[2].code_spans == []


def test_feed_waits_for_the_next_word_only() -> None:
    seg = StreamSegmenter()
    assert seg.feed("Hello world.") == []
    assert seg.feed(" ") == []
    first = seg.feed("Next")
    assert [(s.kind, s.text) for s in first] == [(SegmentKind.SENTENCE, "Hello world."), (SegmentKind.SPACE, " ")]
    assert seg.feed(" word in the U.S. Th") == []  # "The" or "Thailand"?
    assert [s.text for s in seg.feed("e end.")] == ["Next word in the U.S.", " "]
    assert [s.text for s in seg.flush()] == ["The end."]


def test_code_lines_are_released_line_by_line() -> None:
    seg = StreamSegmenter()
    assert [s.text for s in seg.feed("```py\nx = 1\ny")] == ["```py\n", "x = 1\n"]
    assert [s.text for s in seg.feed(" = 2\n```\n")] == ["y = 2\n", "```"]


def test_flush_is_idempotent_and_feeding_after_flush_resumes() -> None:
    seg = StreamSegmenter()
    first = seg.feed("One. Two") + seg.flush()
    assert seg.flush() == []
    later = seg.feed(" three. Four.") + seg.flush()
    everything = first + later
    assert_tiles(seg.text, everything)
    assert [s.text for s in everything if s.checkable] == ["One.", "Two", "three.", "Four."]


def test_empty_delta_and_empty_message() -> None:
    seg = StreamSegmenter()
    assert seg.feed("") == [] and seg.flush() == [] and seg.text == ""


def test_checkable_only_for_sentences() -> None:
    text = "# Head\n\n| a |\n\n```\nx. Y.\n```\n\nReal claim here."
    assert [s.text for s in segment_text(text) if s.checkable] == ["Real claim here."]


# ---------------------------------------------------------------------------- properties
_FRAGMENTS = [
    " ", "  ", "\n", "\n\n", "\t", "\r\n", "\u00a0", "\u2028", ".", ". ", "!", "?", "?!", "...", "…", ":", ",",
    "Dr.", "U.S.", "e.g.", "etc.", "No.", "p.m.", "J.", "A.", "Inc.", "3.14", "v2.0.1", "1990", "5",
    "The", "the", "It", "word", "Word", "Th", "a", "I",
    "- ", "* ", "+ ", "• ", "1. ", "2) ", "[ ] ", "[x] ", "> ", "#", "# ", "## ", "|", "| a | b |", "---", "***",
    "```", "```py", "~~~", "````", "`", "``", "`code.`", '"', "“", "”", "'", "(", ")", "[", "]", "[1]", "[^2",
    "**", "_", "。", "！", "这是", "」", "https://example.com/a.b?x=1", "john.doe@mail.example.org", "😀",
    # runs around the lookahead caps
    "`" * 63, " " * 63, "." * 63, ")" * 63, "(" * 63, "#" * 6, "1" * 9, "x" * 250, "- " * 40,
]
markdownish = st.lists(st.sampled_from(_FRAGMENTS), max_size=40).map("".join)
any_text = st.text(max_size=200)


@PROPERTY
@given(text=st.one_of(markdownish, any_text), data=st.data())
def test_any_split_gives_identical_segments(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=30))
    whole = segment_text(text)
    assert key(stream(split_at(text, cuts))) == key(whole)


@PROPERTY
@given(text=st.one_of(markdownish, any_text))
def test_char_by_char_equals_whole(text: str) -> None:
    assert key(stream(list(text))) == key(segment_text(text))


@PROPERTY
@given(text=st.one_of(any_text, markdownish, st.text(alphabet=st.characters(categories=["Zs", "Cc"]))))
def test_segments_tile_any_text(text: str) -> None:
    assert_tiles(text, segment_text(text))
