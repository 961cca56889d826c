"""Bounded report text: the evidence a report quotes is cut to a window around what matched.

A document without sentence punctuation is one 100 KB "sentence"; a report that quoted it
whole for every checked sentence made a response twenty times its request. Every evidence
text of a report (the verdict's evidence sentence, an edit's evidence, the revision's
evidence sentence, the evidence passages and their titles) goes out cut to a few hundred
characters around the span that decided: the values the verifier compared, the value an
edit puts in, the deciding sentence, else the stretch holding the most of the sentence's
words. Text that fits is left whole; a cut falls on word boundaries and always keeps the
matched span, so correct mode still shows where each change came from. A cut passage's
``start``/``end`` move with its text (the text stays ``source[start:end]``).

Reports are cut when they are built, after the verdict and the edits: what the pipeline
reads is never cut.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from middleware.evidence.lexical import stem, terms
from middleware.pipeline.verifiers.base import DetailedVerdict
from middleware.types import Edit, Passage, Revision, SentenceReport

EXCERPT_CHARS = 400
"""An evidence sentence, NLI window or edit evidence as a report quotes it (characters)."""
PASSAGE_CHARS = 1000
"""An evidence passage as a report carries it: a 4-sentence passage of ordinary prose fits."""
TITLE_CHARS = 200

Span = tuple[int, int]
_WORD = re.compile(r"[^\W_]+")


def excerpt_span(text: str, anchors: Sequence[Span] = (), words: str = "", limit: int = EXCERPT_CHARS) -> Span:
    """The span of ``text`` a report quotes: all of it when it fits ``limit``; else a window
    of at most ``limit`` characters around the leading ``anchors`` that fit together, else
    around the stretch holding most of ``words``' terms, else the beginning."""
    if len(text) <= limit:
        return 0, len(text)
    anchor = _leading_anchors(text, anchors, limit) or densest_span(text, words, limit)
    if anchor is None:
        return _snapped(text, 0, limit, (0, 0))
    start, end = anchor
    start = max(0, start - (limit - (end - start)) // 2)
    end = min(len(text), start + limit)
    return _snapped(text, max(0, end - limit), end, anchor)


def excerpt(text: str, anchors: Sequence[Span] = (), words: str = "", limit: int = EXCERPT_CHARS) -> str:
    start, end = excerpt_span(text, anchors, words, limit)
    return text[start:end]


def densest_span(text: str, words: str, limit: int = EXCERPT_CHARS) -> Span | None:
    """The span from the first to the last word of the window of at most ``limit``
    characters that holds the most distinct terms of ``words`` (the earliest of equals);
    None when ``text`` holds none of them. Words are stemmed one by one here, not through
    ``terms``' cache: a long document would flush it."""
    wanted = set(terms(words))
    hits = [(m.start(), m.end(), term) for m in _WORD.finditer(text) if (term := stem(m.group().lower())) in wanted]
    best: tuple[int, int, int] | None = None  # (distinct terms, first hit, last hit)
    counts: Counter[str] = Counter()
    first = 0
    for last, (_, end, term) in enumerate(hits):
        counts[term] += 1
        while end - hits[first][0] > limit:
            counts[hits[first][2]] -= 1
            counts[hits[first][2]] or counts.pop(hits[first][2])
            first += 1
        if best is None or len(counts) > best[0]:
            best = (len(counts), first, last)
    return (hits[best[1]][0], hits[best[2]][1]) if best is not None else None


def bounded_report(report: SentenceReport, verdict: DetailedVerdict, evidence: Sequence[Passage]) -> SentenceReport:
    """``report`` with every evidence text cut to its window (see the module doc);
    ``verdict`` and ``evidence`` are what the check decided on (the deciding passage and
    the offsets of the values compared in it)."""
    deciding = _deciding_passage(verdict, evidence)
    in_passage = _compared_spans(verdict) if deciding is not None else []
    sentence = report.text
    update: dict[str, object] = {
        "evidence": [_bounded_passage(p, in_passage if _same(p, deciding) else [], sentence) for p in report.evidence],
        "edits": [_bounded_edit(e) for e in report.edits],
    }
    if verdict.evidence_sentence is not None:
        anchors = _within(in_passage, verdict.evidence_span) if _is_quoted(verdict, deciding) else []
        cut = excerpt(verdict.evidence_sentence, anchors, sentence)
        update["verdict"] = verdict.model_copy(update={"evidence_sentence": cut})
    if report.revision is not None:
        update["revision"] = _bounded_revision(report.revision, report.edits, sentence)
    return report.model_copy(update=update)


def _bounded_passage(passage: Passage, anchors: Sequence[Span], sentence: str) -> Passage:
    start, end = excerpt_span(passage.text, anchors, sentence, PASSAGE_CHARS)
    title = passage.title[:TITLE_CHARS] if passage.title is not None else None
    if (start, end) == (0, len(passage.text)) and title == passage.title:
        return passage
    offsets = {"start": passage.start + start, "end": passage.start + end} if passage.start is not None else {}
    return passage.model_copy(update={"text": passage.text[start:end], "title": title, **offsets})


def _bounded_edit(edit: Edit) -> Edit:
    if edit.evidence is None:
        return edit
    cut = excerpt(edit.evidence, _occurrences(edit.evidence, [edit.replacement]), f"{edit.original} {edit.replacement}")
    return edit.model_copy(update={"evidence": cut})


def _bounded_revision(revision: Revision, edits: Sequence[Edit], sentence: str) -> Revision:
    """The revision's evidence sentence around the values the edit puts in (the applied
    edits', else the words the suggestion has and the sentence has not)."""
    quoted = revision.evidence_sentence
    if quoted is None:
        return revision
    suggested = revision.suggested or ""
    said = set(terms(sentence))
    added = " ".join(t for t in terms(suggested) if t not in said) or suggested or sentence
    cut = excerpt(quoted, _occurrences(quoted, [e.replacement for e in edits]), added)
    return revision.model_copy(update={"evidence_sentence": cut})


def _deciding_passage(verdict: DetailedVerdict, evidence: Sequence[Passage]) -> Passage | None:
    index = verdict.evidence_index
    if index is None or not 0 <= index < len(evidence) or evidence[index].id != verdict.evidence_id:
        return None
    return evidence[index]


def _same(passage: Passage, other: Passage | None) -> bool:
    return other is not None and (passage.provider, passage.id) == (other.provider, other.id)


def _compared_spans(verdict: DetailedVerdict) -> list[Span]:
    """Passage offsets of what decided, most specific first: the values compared in the
    deciding passage, then the deciding sentence."""
    spans = [m.evidence_span for m in verdict.mismatches if m.evidence_index == verdict.evidence_index]
    return [s for s in spans if s is not None] + ([verdict.evidence_span] if verdict.evidence_span else [])


def _is_quoted(verdict: DetailedVerdict, passage: Passage | None) -> bool:
    """Whether the verdict's evidence sentence is its deciding passage's text at ``evidence_span``."""
    span = verdict.evidence_span
    return passage is not None and span is not None and passage.text[span[0] : span[1]] == verdict.evidence_sentence


def _within(spans: Iterable[Span], outer: Span | None) -> list[Span]:
    """The spans inside ``outer``, in its own offsets."""
    if outer is None:
        return []
    return [(a - outer[0], b - outer[0]) for a, b in spans if outer[0] <= a and b <= outer[1] and (a, b) != outer]


def _occurrences(text: str, needles: Iterable[str]) -> list[Span]:
    """Where each needle first occurs in ``text`` (case-insensitively), in the needles' order."""
    folded = text.casefold()
    out = []
    for needle in needles:
        at = folded.find(needle.strip().casefold()) if needle.strip() else -1
        if at >= 0:
            out.append((at, at + len(needle.strip())))
    return out


def _leading_anchors(text: str, anchors: Sequence[Span], limit: int) -> Span | None:
    """The union of the first anchors that fit in ``limit`` together; an anchor longer than
    ``limit`` (a deciding "sentence" of a whole unpunctuated document) is none."""
    valid = [(a, b) for a, b in anchors if 0 <= a <= b <= len(text) and b - a <= limit]
    if not valid:
        return None
    start, end = valid[0]
    for a, b in valid[1:]:
        if max(end, b) - min(start, a) > limit:
            break
        start, end = min(start, a), max(end, b)
    return start, end


def _snapped(text: str, start: int, end: int, keep: Span) -> Span:
    """``start``/``end`` moved inwards to word boundaries and past whitespace, never into ``keep``."""
    if start > 0 and not text[start - 1].isspace():
        space = text.find(" ", start, keep[0])
        start = space + 1 if space >= 0 else start
    if end < len(text) and not text[end].isspace():
        space = text.rfind(" ", keep[1], end)
        end = space if space >= 0 else end
    while start < keep[0] and text[start].isspace():
        start += 1
    while end > keep[1] and text[end - 1].isspace():
        end -= 1
    return start, end
