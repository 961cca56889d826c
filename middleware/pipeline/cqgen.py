"""Comprehensive question generation (RARR's CQGen): questions that together cover every
checkable aspect of a claim, used as search queries. Impartial questions find
contradicting evidence that the claim restated would not (RARR's ablation).

Backends: ``slots`` (offline: one question per slot, phrased so the slot is the answer:
"When was Marie Curie born?"), ``llm`` (RARR few-shot prompt, 3 samples, union of the
de-duplicated questions), ``seq2seq`` (a question-generation model through the runtime)."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any, Protocol, runtime_checkable

from rapidfuzz import fuzz
from spacy.tokens import Span, Token

from middleware.pipeline.prompts import ChatModel, cqgen_messages, parse_questions
from middleware.pipeline.quantities import Quantity
from middleware.pipeline.slots import Analysis, Slot, analyse
from middleware.types import Question

log = logging.getLogger(__name__)

_LIGHT_VERBS = {"be", "have", "do", "become", "get", "make"}
_PLACE_PREPS = {"in", "at", "from", "to", "near", "into", "on"}
_PLACE_LABELS = {"GPE", "LOC", "FAC"}
_CLAUSE_DEPS = {"conj", "cc", "advcl", "relcl", "ccomp", "parataxis", "punct", "mark"}


@runtime_checkable
class QuestionGenerator(Protocol):
    name: str

    async def generate(self, claim: str, context: str | None = None) -> list[Question]: ...


class SlotQuestionGenerator:
    """Offline: one question per entity, number, quantity and date of the claim, plus one
    yes/no question for the relation when few slots exist; the claim itself if none."""

    name = "slots"

    def __init__(self, max_questions: int = 6) -> None:
        self.max_questions = max_questions

    async def generate(self, claim: str, context: str | None = None) -> list[Question]:
        return self.questions(claim)

    def questions(self, claim: str) -> list[Question]:
        analysis = analyse(claim)
        out: list[Question] = []
        for slot in analysis.slots:
            text = slot_question(slot, analysis)
            if text:
                out.append(
                    Question(text=text, slot=slot.text, slot_type=slot.kind, span=(slot.start, slot.end))
                )
        relation = analysis.relation
        if len(out) < 2 and relation is not None and relation.lemma not in _LIGHT_VERBS:
            text = relation_question(analysis)
            if text:
                out.append(
                    Question(
                        text=text,
                        slot=relation.text,
                        slot_type="relation",
                        span=(relation.start, relation.end),
                    )
                )
        if not out:
            out.append(Question(text=claim.strip()))
        return dedupe(out)[: self.max_questions]


class LLMQuestionGenerator:
    """RARR CQGen through an OpenAI-compatible endpoint: ``samples`` completions at
    ``temperature``, questions united and de-duplicated."""

    name = "llm"

    def __init__(
        self, chat: ChatModel, *, samples: int = 3, temperature: float = 0.7, max_questions: int = 6
    ) -> None:
        self.chat = chat
        self.samples = samples
        self.temperature = temperature
        self.max_questions = max_questions

    async def generate(self, claim: str, context: str | None = None) -> list[Question]:
        completions = await self.chat.complete(
            cqgen_messages(claim, context), n=self.samples, temperature=self.temperature
        )
        questions = [Question(text=q) for c in completions for q in parse_questions(c)]
        return dedupe(questions)[: self.max_questions] or [Question(text=claim.strip())]


class Seq2SeqQuestionGenerator:
    """A seq2seq question generator (hub id, checkpoint or ONNX export, loaded through
    ``middleware.runtime.load_seq2seq``). ``model`` needs ``generate(texts,
    max_new_tokens=...) -> list[str]``; the output may hold several questions separated by
    '?', '<sep>' or new lines."""

    name = "seq2seq"

    def __init__(
        self,
        model: Any,
        *,
        prefix: str = "generate questions: ",
        max_new_tokens: int = 64,
        max_questions: int = 6,
    ) -> None:
        if not callable(getattr(model, "generate", None)):
            raise TypeError(f"{type(model).__name__} has no generate(texts, max_new_tokens=...) method")
        self.model = model
        self.prefix = prefix
        self.max_new_tokens = max_new_tokens
        self.max_questions = max_questions

    async def generate(self, claim: str, context: str | None = None) -> list[Question]:
        outputs = await asyncio.to_thread(
            self.model.generate, [self.prefix + claim], max_new_tokens=self.max_new_tokens
        )
        pieces = re.split(r"<sep>|\n|(?<=\?)\s*", outputs[0] if outputs else "")
        questions = [Question(text=p.strip()) for p in pieces if len(p.strip()) > 3]
        return dedupe(questions)[: self.max_questions] or [Question(text=claim.strip())]


def dedupe(questions: list[Question]) -> list[Question]:
    """Drop near-duplicates (same question word, token-sort ratio >= 90), keeping the first."""
    kept: list[Question] = []
    seen: list[str] = []
    for question in questions:
        norm = " ".join(question.text.lower().strip(" ?").split())
        if all(
            norm.split()[:1] != other.split()[:1] or fuzz.token_sort_ratio(norm, other) < 90 for other in seen
        ):
            kept.append(question)
            seen.append(norm)
    return kept


def slot_question(slot: Slot, analysis: Analysis) -> str | None:
    """A question whose answer is the slot, from the clause the slot sits in."""
    doc = analysis.doc
    span = doc.char_span(slot.start, slot.end, alignment_mode="expand")
    if span is None or (isinstance(slot.value, Quantity) and slot.value.dimension == "ordinal"):
        return None
    verb = _clause_verb(span.root)
    if verb is None:
        return _cloze(slot, analysis)
    subject = _subject_of(verb)
    wh, drop = _wh(slot, span)
    if subject is not None and _inside(span.root, subject):
        if span.root.i != subject.i:
            return _cloze(slot, analysis)
        rest = _words(verb, exclude={*(t.i for t in subject.subtree)})
        return _finish(f"{'Who' if slot.label == 'PERSON' else 'What'} {rest}")
    if subject is None:
        return _cloze(slot, analysis)
    excluded = {*(t.i for t in subject.subtree), *(t.i for t in span.root.subtree), *drop}
    governor = span.root.head
    if governor.dep_ in ("prep", "agent") and len([c for c in governor.children]) == 1:
        if wh in ("When", "Where") or wh.startswith("How"):
            excluded.add(governor.i)
    aux = next((c for c in verb.children if c.dep_ in ("aux", "auxpass") and c.i < verb.i), None)
    subject_text = _subject_text(subject)
    if aux is not None:
        excluded.add(aux.i)
        return _finish(f"{wh} {aux.text.lower()} {subject_text} {_words(verb, excluded)}")
    if verb.lemma_ == "be":
        excluded.add(verb.i)
        return _finish(f"{wh} {verb.text.lower()} {subject_text} {_words(verb, excluded)}")
    do = {"VBD": "did", "VBZ": "does"}.get(verb.tag_, "do")
    words = _words(verb, excluded, base_verb=verb.i)
    return _finish(f"{wh} {do} {subject_text} {words}")


def relation_question(analysis: Analysis) -> str | None:
    """A yes/no question about the main relation: 'Did Marie Curie discover polonium?'"""
    doc = analysis.doc
    root = next((t for t in doc if t.dep_ == "ROOT"), None)
    if root is None or root.pos_ != "VERB":
        return None
    subject = _subject_of(root)
    if subject is None:
        return None
    aux = next((c for c in root.children if c.dep_ in ("aux", "auxpass") and c.i < root.i), None)
    excluded = {*(t.i for t in subject.subtree)}
    if aux is not None:
        excluded.add(aux.i)
        return _finish(f"{aux.text.capitalize()} {_subject_text(subject)} {_words(root, excluded)}")
    do = {"VBD": "Did", "VBZ": "Does"}.get(root.tag_, "Do")
    return _finish(f"{do} {_subject_text(subject)} {_words(root, excluded, base_verb=root.i)}")


def _wh(slot: Slot, span: Span) -> tuple[str, set[int]]:
    """The question word for a slot and tokens to drop with it (the adjective of 'how tall')."""
    root = span.root
    if slot.kind == "date":
        return "When", set()
    if isinstance(slot.value, Quantity):
        if slot.value.dimension and slot.value.dimension.startswith("currency"):
            return "How much", set()
        if slot.value.dimension == "percent":
            return "What percentage", set()
        head = root.head
        if root.dep_ == "nummod" and head.dep_ == "attr" and head.head.lemma_ == "be":
            return "What", {t.i for t in head.subtree}
        if head.pos_ == "ADJ" and head.i != root.i:
            return f"How {head.text.lower()}", {head.i}
        if root.dep_ == "nummod" and head.pos_ in ("NOUN", "PROPN"):
            return f"How many {head.text}", {head.i, *(t.i for t in head.subtree)}
        return ("How many" if slot.value.dimension is None else "How much"), set()
    if slot.label == "PERSON":
        return "Who", set()
    if slot.label in _PLACE_LABELS and root.head.dep_ == "prep" and root.head.lower_ in _PLACE_PREPS:
        return "Where", set()
    return "What", set()


def _clause_verb(token: Token) -> Token | None:
    current = token
    for _ in range(12):
        if current.pos_ == "VERB" or (current.pos_ == "AUX" and current.dep_ in ("ROOT", "conj")):
            return current
        if current.head.i == current.i:
            return None
        current = current.head
    return None


def _subject_of(verb: Token) -> Token | None:
    current: Token | None = verb
    while current is not None:
        subject = next((c for c in current.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if subject is not None:
            return subject
        current = current.head if current.dep_ in ("conj", "xcomp") and current.head.i != current.i else None
    return None


def _inside(token: Token, ancestor: Token) -> bool:
    return token.i == ancestor.i or any(a.i == ancestor.i for a in token.ancestors)


def _subject_text(subject: Token) -> str:
    tokens = [t for t in subject.subtree if t.dep_ not in ("punct", "appos", "relcl", "acl")]
    text = " ".join(t.text for t in tokens)
    first = tokens[0] if tokens else subject
    if first.pos_ != "PROPN" and not first.text.isupper() and text[:1].isupper():
        text = text[:1].lower() + text[1:]
    return re.sub(r"\s+([,.'])", r"\1", text)


def _words(verb: Token, exclude: set[int], base_verb: int | None = None) -> str:
    """The verb's clause without ``exclude``d tokens and without other clauses."""
    skip = set(exclude)
    for child in verb.children:
        if child.dep_ in _CLAUSE_DEPS:
            skip.update(t.i for t in child.subtree)
    words = []
    for token in verb.subtree:
        if token.i in skip or token.dep_ == "punct":
            continue
        words.append(token.lemma_ if token.i == base_verb else token.text)
    return " ".join(words)


def _finish(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s+([,.'%])|\s+(n't|'s)", lambda m: (m.group(1) or m.group(2)), text)
    return text[:1].upper() + text[1:].rstrip(" ,.;:") + "?"


def _cloze(slot: Slot, analysis: Analysis) -> str:
    """Fallback: the claim with the slot replaced by a question word."""
    word = {"date": "when", "quantity": "how much", "number": "how many"}.get(slot.kind, "what")
    if slot.label == "PERSON":
        word = "who"
    text = analysis.text[: slot.start] + word + analysis.text[slot.end :]
    return _finish(text.strip().rstrip("."))
