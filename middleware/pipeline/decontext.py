"""Decontextualisation: rewrite a sentence so it stands alone before questions are asked
and evidence is judged ("He moved to Paris in 1891." -> "Marie Curie moved to Paris in
1891."). Offline: spaCy heuristics (the most recent compatible entity, or the subject of
the previous sentence). Optional: an LLM rewrite, guarded against changing the facts.

The result keeps a map back to the original sentence, so spans found in the rewritten
text (a verdict's claim span) can be reported in the original's offsets.

The user's question is read once per request (:func:`prepare_question`): a prompt with pasted
documents takes a second to parse, and every sentence of the answer reads the same referents."""

from __future__ import annotations

import bisect
import difflib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from spacy.tokens import Token

from middleware.evidence.lexical import term_recall, terms
from middleware.text.nlp import get_nlp
from middleware.pipeline.lexicon import PERSONAL_PRONOUNS, PLURAL_PRONOUNS, THING_PRONOUNS
from middleware.pipeline.prompts import ChatModel, decontext_messages, parse_rewrite
from middleware.pipeline.slots import Analysis, analyse, analysis_of

log = logging.getLogger(__name__)

_POSSESSIVE = {"his", "its", "their", "hers", "theirs"}
_TYPE_NOUNS = {
    "company": "org", "firm": "org", "corporation": "org", "business": "org", "organisation": "org",
    "organization": "org", "band": "org", "group": "org", "team": "org", "club": "org", "university": "org",
    "party": "org", "agency": "org", "city": "place", "town": "place", "capital": "place", "country": "place",
    "nation": "place", "state": "place", "village": "place", "region": "place", "island": "place",
    "river": "place", "mountain": "place", "lake": "place", "building": "place", "tower": "place",
    "bridge": "place", "film": "work", "movie": "work", "book": "work", "novel": "work", "album": "work",
    "song": "work", "series": "work", "show": "work", "game": "work", "war": "event", "battle": "event",
    "man": "person", "woman": "person", "scientist": "person", "physicist": "person", "chemist": "person",
    "writer": "person", "author": "person", "actor": "person", "actress": "person", "singer": "person",
    "president": "person", "king": "person", "queen": "person", "politician": "person", "artist": "person",
}  # fmt: skip
SHARED_PARSE_CHARS = 2000
"""A question up to this size is parsed through the shared parse cache (``slots.analyse``); a
longer one (a prompt with documents) is parsed on its own, so its parse is not kept there."""
_GROUP_OF_LABEL = {
    "PERSON": "person", "ORG": "org", "GPE": "place", "LOC": "place", "FAC": "place", "WORK_OF_ART": "work",
    "PRODUCT": "work", "EVENT": "event", "NORP": "norp", "PROPN": "propn", "LAW": "work",
}  # fmt: skip


@dataclass(frozen=True)
class Replacement:
    start: int  # offsets in the original sentence
    end: int
    original: str
    text: str


@dataclass(frozen=True)
class Decontextualised:
    original: str
    text: str
    replacements: tuple[Replacement, ...] = ()

    def to_original(self, span: tuple[int, int]) -> tuple[int, int]:
        """Map a span of ``text`` to the original sentence; a span touching a replaced
        region grows to cover the whole original region."""
        start, end = span
        out_start, out_end = start, end
        shift = 0
        for rep in self.replacements:
            new_start = rep.start + shift
            new_end = new_start + len(rep.text)
            delta = len(rep.text) - (rep.end - rep.start)
            if start >= new_end:
                out_start = start - (shift + delta)
            elif start >= new_start:
                out_start = rep.start
            if end >= new_end:
                out_end = end - (shift + delta)
            elif end > new_start:
                out_end = rep.end
            shift += delta
        return max(0, min(out_start, len(self.original))), max(0, min(out_end, len(self.original)))


@dataclass(frozen=True)
class _Referent:
    text: str
    group: str  # person, org, place, work, event, norp, propn, thing
    plural: bool


@dataclass(frozen=True)
class PreparedQuestion:
    """The user's question, read once per request: its text and the referents a pronoun of
    the answer may point to (oldest first)."""

    text: str
    referents: tuple[_Referent, ...] = ()


def prepare_question(question: str) -> PreparedQuestion:
    """Parse the question and collect its referents: linear in its length, and CPU-bound
    (run it in a worker thread when the question is long)."""
    if not question:
        return PreparedQuestion(question)
    analysis = analyse(question) if len(question) <= SHARED_PARSE_CHARS else analysis_of(get_nlp()(question))
    return PreparedQuestion(question, tuple(_referents(analysis)))


UserQuestion = str | PreparedQuestion
"""The user's question as a decontextualiser takes it: as written, or prepared once per request."""


def question_text(question: UserQuestion | None) -> str | None:
    return question.text if isinstance(question, PreparedQuestion) else question


@runtime_checkable
class Decontextualiser(Protocol):
    name: str

    async def decontextualise(
        self, sentence: str, previous: Sequence[str] = (), question: UserQuestion | None = None
    ) -> Decontextualised: ...


class NoDecontextualiser:
    """The 'none' backend: the sentence as it is."""

    name = "none"

    async def decontextualise(
        self, sentence: str, previous: Sequence[str] = (), question: UserQuestion | None = None
    ) -> Decontextualised:
        return Decontextualised(sentence, sentence)


MAX_PREVIOUS = 3
"""Earlier sentences of the answer whose referents a pronoun may stand for."""


class SpacyDecontextualiser:
    """Pronouns (he/she/it/they/his/its/their, a subject 'this') and definite descriptions
    ('the company', 'the city') are replaced by the most recent compatible referent from the
    earlier sentences and then the user's question."""

    name = "spacy"

    def __init__(self, max_previous: int = MAX_PREVIOUS) -> None:
        self.max_previous = max_previous

    async def decontextualise(
        self, sentence: str, previous: Sequence[str] = (), question: UserQuestion | None = None
    ) -> Decontextualised:
        return self.resolve(sentence, previous, question)

    def resolve(
        self, sentence: str, previous: Sequence[str] = (), question: UserQuestion | None = None
    ) -> Decontextualised:
        asked = prepare_question(question) if isinstance(question, str) else question
        referents = [*(asked.referents if asked is not None else ()),
                     *(r for text in previous[-self.max_previous :] for r in _referents(analyse(text)))]  # oldest first
        last_subject = _subject_referent(analyse(previous[-1])) if previous else None
        if not referents and last_subject is None:
            return Decontextualised(sentence, sentence)
        analysis = analyse(sentence)
        replacements: list[Replacement] = []
        for token in analysis.doc:
            rep = self._replace_pronoun(token, analysis, referents, last_subject)
            if rep is not None:
                replacements.append(rep)
        replacements += _descriptions(analysis, referents, {(r.start, r.end) for r in replacements})
        replacements.sort(key=lambda r: r.start)
        return _apply(sentence, replacements)

    def _replace_pronoun(
        self, token: Token, analysis: Analysis, referents: list[_Referent], last_subject: _Referent | None
    ) -> Replacement | None:
        word = token.lower_
        if token.pos_ != "PRON" and not (word in _POSSESSIVE or word == "her"):
            return None
        if word == "this" and token.dep_ in ("nsubj", "nsubjpass") and last_subject is not None:
            referent: _Referent | None = last_subject
        elif word in PERSONAL_PRONOUNS:
            referent = _latest(referents, {"person"}, plural=False)
        elif word in THING_PRONOUNS:
            if token.dep_ == "expl" or _is_dummy_it(token):
                return None
            referent = _latest(referents, {"org", "place", "work", "event", "propn", "thing"}, plural=False)
        elif word in PLURAL_PRONOUNS:
            referent = _latest(referents, {"org", "norp", "thing", "person", "propn"}, plural=True)
        else:
            return None
        if referent is None or _antecedent_in_sentence(token, analysis, referent):
            return None
        text = referent.text
        possessive = word in _POSSESSIVE or (word == "her" and token.tag_ == "PRP$")
        if possessive:
            text = text + ("'" if referent.plural and text.endswith("s") else "'s")
        if token.i == 0 and text[:1].islower():
            text = text[:1].upper() + text[1:]
        return Replacement(token.idx, token.idx + len(token), token.text, text)


class LLMDecontextualiser:
    """An LLM rewrite (context fenced as data), accepted only if it keeps the sentence's
    content words; otherwise, or on error, the spaCy rewrite."""

    name = "llm"

    def __init__(self, chat: ChatModel, fallback: Decontextualiser | None = None) -> None:
        self.chat = chat
        self.fallback = fallback or SpacyDecontextualiser()

    async def decontextualise(
        self, sentence: str, previous: Sequence[str] = (), question: UserQuestion | None = None
    ) -> Decontextualised:
        asked = question_text(question)
        context = "\n".join([*([f"User: {asked}"] if asked else []), *previous[-3:]])
        if not context.strip():
            return Decontextualised(sentence, sentence)
        try:
            completions = await self.chat.complete(
                decontext_messages(sentence, context), n=1, temperature=0.0
            )
        except Exception as exc:  # noqa: BLE001 - any client failure falls back
            # The error text may echo the endpoint's body (keys included): name the type only.
            log.warning("llm decontextualisation failed (%s); using %s", type(exc).__name__, self.fallback.name)
            return await self.fallback.decontextualise(sentence, previous, question)
        rewrite = parse_rewrite(completions[0]) if completions else None
        if rewrite is None or not _faithful(sentence, rewrite):
            return await self.fallback.decontextualise(sentence, previous, question)
        return _from_diff(sentence, rewrite)


def _referents(analysis: Analysis) -> list[_Referent]:
    """The sentence's entities, then its subject last: the most salient referent is found
    first when searching from the most recent. Linear in the text's length (a question may be
    a prompt of documents)."""
    starts = [t.idx for t in analysis.doc]
    out = [
        _Referent(
            _with_article(analysis, s.start, s.text),
            _GROUP_OF_LABEL.get(s.label, "thing"),
            _plural(analysis, s.end, s.label, starts),
        )
        for s in analysis.slots
        if s.kind == "entity"
    ]
    subject = _subject_referent(analysis)
    if subject is not None:
        out = [r for r in out if r.text != subject.text] + [subject]
    return out


def _with_article(analysis: Analysis, start: int, text: str) -> str:
    """'Eiffel Tower' -> 'the Eiffel Tower' when the sentence wrote it with 'the'."""
    return "the " + text if analysis.text[max(0, start - 4) : start].lower() == "the " else text


def _plural(analysis: Analysis, end: int, label: str, starts: Sequence[int] | None = None) -> bool:
    """Whether the entity ending at ``end`` is plural (its last token's tag); ``starts``: the
    tokens' offsets, to find that token without scanning the text."""
    if label == "NORP":
        return True
    if starts is None:
        starts = [t.idx for t in analysis.doc]
    last = bisect.bisect_left(starts, end) - 1
    return last >= 0 and analysis.doc[last].tag_ in ("NNS", "NNPS")


def _subject_referent(analysis: Analysis) -> _Referent | None:
    if analysis.subject is None:
        return None
    span = analysis.doc.char_span(*analysis.subject, alignment_mode="expand")
    if span is None or span.root.pos_ == "PRON":
        return None
    entity = next(
        (s for s in analysis.slots if s.kind == "entity" and s.start <= span.root.idx < s.end), None
    )
    if entity is not None:
        group = _GROUP_OF_LABEL.get(entity.label, "thing")
        return _Referent(
            _with_article(analysis, entity.start, entity.text),
            group,
            _plural(analysis, entity.end, entity.label),
        )
    text = span.text
    if text[:1].isupper() and span[0].pos_ == "DET":
        text = text[:1].lower() + text[1:]
    group = _TYPE_NOUNS.get(span.root.lemma_.lower(), "thing")
    return _Referent(text, group, span.root.tag_ in ("NNS", "NNPS"))


def _latest(referents: list[_Referent], groups: set[str], plural: bool) -> _Referent | None:
    for referent in reversed(referents):
        if referent.group in groups and (referent.plural == plural or referent.group in ("org", "norp")):
            return referent
    return None


def _is_dummy_it(token: Token) -> bool:
    """'It is important to ...', 'it was raining', 'it seems that ...'."""
    head = token.head
    if head.lemma_ in ("seem", "appear", "rain", "snow", "happen"):
        return True
    return any(c.dep_ in ("ccomp", "xcomp") and c.i > token.i for c in head.children) and any(
        c.dep_ == "acomp" for c in head.children
    )


def _antecedent_in_sentence(token: Token, analysis: Analysis, referent: _Referent) -> bool:
    """A compatible entity earlier in the same sentence ('Curie said she ...')."""
    for slot in analysis.slots:
        if slot.kind == "entity" and slot.end <= token.idx:
            group = _GROUP_OF_LABEL.get(slot.label, "thing")
            if group == referent.group or group == "propn":
                return True
    return False


def _descriptions(
    analysis: Analysis, referents: list[_Referent], taken: set[tuple[int, int]]
) -> list[Replacement]:
    """'the company' -> the most recent ORG; 'the city' -> the most recent place."""
    out = []
    for chunk in analysis.doc.noun_chunks:
        if (
            len(chunk) > 3
            or chunk[0].lower_ not in ("the", "this")
            or (chunk.start_char, chunk.end_char) in taken
        ):
            continue
        group = _TYPE_NOUNS.get(chunk.root.lemma_.lower())
        following = analysis.doc[chunk.end] if chunk.end < len(analysis.doc) else None
        if group is None or len(chunk) != 2 or (following is not None and following.lower_ == "of"):
            continue
        referent = _latest(referents, {group}, plural=chunk.root.tag_ == "NNS")
        if referent is None or referent.text.lower() == chunk.text.lower():
            continue
        out.append(Replacement(chunk.start_char, chunk.end_char, chunk.text, referent.text))
    return out


def _apply(sentence: str, replacements: list[Replacement]) -> Decontextualised:
    pieces, cursor = [], 0
    for rep in replacements:
        pieces += [sentence[cursor : rep.start], rep.text]
        cursor = rep.end
    pieces.append(sentence[cursor:])
    return Decontextualised(sentence, "".join(pieces), tuple(replacements))


def _faithful(sentence: str, rewrite: str) -> bool:
    """The rewrite keeps the sentence's content words and is not much longer."""
    original_terms = [t for t in terms(sentence)]
    return len(rewrite) <= 2 * len(sentence) + 60 and term_recall(original_terms, terms(rewrite)) >= 0.8


def _from_diff(sentence: str, rewrite: str) -> Decontextualised:
    matcher = difflib.SequenceMatcher(a=sentence, b=rewrite, autojunk=False)
    replacements = [
        Replacement(i1, i2, sentence[i1:i2], rewrite[j1:j2])
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]
    return Decontextualised(sentence, rewrite, tuple(replacements))
