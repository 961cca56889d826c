"""The clause of a sentence that an edit changes.

Answers join facts in one sentence ('Four alleged attackers were killed, but their affiliation
remains unclear.'), each often stated by a different sentence of the source. A value swap
changes one clause; whether its evidence sentence supports the swap is a question about that
clause, since the other is unchanged by the edit (and was judged with the sentence). The gate
reads the edited clause beside the whole sentence (``middleware.revise.gate``).
"""

from __future__ import annotations

from collections.abc import Sequence

from spacy.tokens import Token

from middleware.pipeline.slots import analyse
from middleware.types import Edit

_VERBS = ("VERB", "AUX")
_SUBJECTS = ("nsubj", "nsubjpass")


def edited_clause(sentence: str, edits: Sequence[Edit]) -> tuple[str, str] | None:
    """The main or coordinated clause of ``sentence`` that holds every edit, as written and
    as edited: the verb's words without the clauses conjoined to it, with the subject it
    shares where it has none of its own ('The company was founded in 1998 and is
    headquartered in Boston' -> 'The company is headquartered in Boston'). None where the
    sentence is a single clause, the edits lie in more than one clause, or their clause is
    subordinate (a relative or adverbial clause reads badly alone: 'who was born in 1931')."""
    if not edits:
        return None
    doc = analyse(sentence).doc
    touched = [t for t in doc if any(e.start <= t.idx < e.end for e in edits)]
    heads = {_clause_verb(t) for t in touched}
    if len(heads) != 1:
        return None
    verb = heads.pop()
    if verb is None or not (verb.dep_ == "ROOT" or (verb.dep_ == "conj" and verb.head.pos_ in _VERBS)):
        return None
    conjoined = [c for c in verb.children if c.dep_ == "conj" and c.pos_ in _VERBS]
    left_out = {t.i for c in conjoined for t in c.subtree}
    left_out |= {c.i for c in verb.children if c.dep_ == "cc" and conjoined}
    words = [t for t in verb.subtree if t.i not in left_out]
    if verb.dep_ == "conj" and not any(c.dep_ in _SUBJECTS for c in verb.children):
        shared = next((c for c in verb.head.children if c.dep_ in _SUBJECTS), None)
        if shared is None:
            return None
        words = [*shared.subtree, *(t for t in words if t.dep_ != "cc" or t.head is not verb)]
    spans = _spans(words)
    if not all(any(s <= e.start and e.end <= t for s, t in spans) for e in edits):
        return None
    original = " ".join(sentence[s:t] for s, t in spans)
    if original.rstrip(" .") == sentence.strip().rstrip(" ."):
        return None
    edited = " ".join(_apply(sentence, s, t, edits) for s, t in spans)
    return original, edited


def _clause_verb(token: Token) -> Token | None:
    """The verb whose clause ``token`` is in."""
    while token.pos_ not in _VERBS:
        if token.head is token:
            return None
        token = token.head
    return token


def _spans(words: Sequence[Token]) -> list[tuple[int, int]]:
    """Character spans of runs of adjacent tokens, in sentence order, without punctuation at
    their ends (the comma before a conjoined clause, the full stop)."""
    runs: list[list[Token]] = []
    for t in sorted(words, key=lambda t: t.i):
        if runs and t.i == runs[-1][-1].i + 1:
            runs[-1].append(t)
        else:
            runs.append([t])
    out = []
    for run in runs:
        while run and run[-1].is_punct:
            run.pop()
        while run and run[0].is_punct:
            run.pop(0)
        if run:
            out.append((run[0].idx, run[-1].idx + len(run[-1].text)))
    return out


def _apply(sentence: str, start: int, end: int, edits: Sequence[Edit]) -> str:
    """``sentence[start:end]`` with the edits that lie in it made."""
    text, shift = sentence[start:end], -start
    for e in sorted(edits, key=lambda e: e.start):
        if start <= e.start and e.end <= end:
            text = text[: e.start + shift] + e.replacement + text[e.end + shift :]
            shift += len(e.replacement) - (e.end - e.start)
    return text
