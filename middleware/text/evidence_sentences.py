"""Sentence splitting of evidence text: a rule-based spaCy sentencizer (no parse), with
character offsets, cached by text. Evidence passages are short and repeat across
sentences of one message, so the cache hits often."""

from __future__ import annotations

from functools import lru_cache

import spacy
import spacy.language


@lru_cache(maxsize=1)
def _splitter() -> spacy.language.Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


@lru_cache(maxsize=8192)
def split_sentences(text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) character offsets of the sentences of ``text``, whitespace trimmed;
    line breaks always end a sentence (lists, headings, table rows)."""
    out: list[tuple[int, int]] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.strip():
            for sent in _splitter()(line).sents:
                start = offset + sent.start_char
                end = offset + sent.end_char
                while start < end and text[start].isspace():
                    start += 1
                while end > start and text[end - 1].isspace():
                    end -= 1
                if end > start:
                    out.append((start, end))
        offset += len(line)
    return tuple(out)
