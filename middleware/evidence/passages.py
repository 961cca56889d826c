"""Passages: the unit of evidence. A document is cut into sliding windows of up to ``window``
sentences that never cross a markdown heading (RARR's candidate snippets) or a code block. The one passage
splitter of the project: the local index and the request-context source both use it.

Each passage keeps its source, the document title and its character offsets in the source
text, so ``text[p.start:p.end] == p.text``.

Stride: RARR slides its 4-sentence window one sentence at a time over the 5 pages of one
query. Over a whole index that stores every sentence four times and fills the top-k with
near-duplicates of one region, so the default stride is 2: every sentence is in two
passages and every pair of adjacent sentences shares a passage.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from middleware.text.answer_segmenter import segment_text
from middleware.types import Passage, Segment, SegmentKind

WINDOW = 4
STRIDE = 2

_UNITS = (SegmentKind.SENTENCE, SegmentKind.TABLE)
"""Segment kinds a passage is made of (a table row counts as a sentence)."""
_BREAKS = (SegmentKind.HEADING, SegmentKind.CODE)
"""Segment kinds no passage spans: headings (as RARR) and code blocks, which are left out."""


def document_passages(
    text: str,
    source: str,
    title: str | None = None,
    window: int = WINDOW,
    stride: int = STRIDE,
    *,
    provider: str = "index",
    url: str | None = None,
    default_title: str | None = None,
) -> list[Passage]:
    """Cut ``text`` into passages of up to ``window`` sentences, starting every ``stride``
    sentences, breaking at headings and code blocks. ``title`` defaults to the text's first heading, then to
    ``default_title``. The last window of a section is full-length (it ends on the section's
    last sentence), so no sentence is left out and no window is a subset of another."""
    if window < 1 or stride < 1:
        raise ValueError(f"window and stride must be positive, got {window} and {stride}")
    segments = segment_text(text)
    if title is None:
        title = first_heading(segments) or default_title
    passages = []
    for units in _sections(text, segments):
        for first, last in windows(len(units), window, stride):
            start, end = units[first][0], units[last][1]
            body = text[start:end]
            passages.append(
                Passage(
                    id=passage_id(source, start, end, body),
                    text=body,
                    provider=provider,
                    source=source,
                    title=title,
                    url=url,
                    start=start,
                    end=end,
                )
            )
    return passages


def first_heading(segments: Sequence[Segment]) -> str | None:
    for segment in segments:
        if segment.kind is SegmentKind.HEADING:
            title = heading_text(segment.text)
            if title:
                return title
    return None


def heading_text(raw: str) -> str:
    """``'## Early life\\n'`` -> ``'Early life'`` (ATX markers and closing hashes dropped)."""
    line = raw.strip()
    if line.startswith("#"):
        line = line.lstrip("#").strip().rstrip("#").strip()
    elif "\n" in line:  # setext heading: text over a ==== or ---- line
        line = line.split("\n", 1)[0].strip()
    return line


def windows(n: int, window: int, stride: int) -> list[tuple[int, int]]:
    """Inclusive (first, last) unit indices of the windows over ``n`` units. A stride
    longer than the window is shortened to it: no unit is ever left out."""
    stride = min(stride, window)
    if n == 0:
        return []
    if n <= window:
        return [(0, n - 1)]
    starts = list(range(0, n - window + 1, stride))
    if starts[-1] + window < n:
        starts.append(n - window)
    return [(s, s + window - 1) for s in starts]


def embedding_text(passage: Passage) -> str:
    """What is embedded for a passage: its text, after the title when the text does not
    name it (a passage in the middle of a document often says 'it' for the subject)."""
    if passage.title and passage.title.casefold() not in passage.text.casefold():
        return f"{passage.title}. {passage.text}"
    return passage.text


def passage_id(source: str, start: int, end: int, text: str) -> str:
    """Stable while the passage is unchanged; unique within a provider."""
    digest = hashlib.blake2b(f"{source}\0{start}\0{end}\0{text}".encode(), digest_size=8)
    return digest.hexdigest()


def _sections(text: str, segments: Sequence[Segment]) -> list[list[tuple[int, int]]]:
    """Unit spans (whitespace trimmed) grouped into the runs between headings and code."""
    sections: list[list[tuple[int, int]]] = [[]]
    for segment in segments:
        if segment.kind in _BREAKS:
            sections.append([])
        elif segment.kind in _UNITS:
            span = _trimmed(text, segment.start, segment.end)
            if span is not None:
                sections[-1].append(span)
    return [units for units in sections if units]


def _trimmed(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end > start else None
