"""The offline editor: replace the contradicted span with the evidence's span of the same
type, re-verify, keep the edit only if the verdict improves.

Candidate edits:
1. the verifier's slot mismatches (a DetailedVerdict's ``mismatches``), each in up to four
   forms: a bare year for a bare year, projected onto the claim's granularity ('September
   1606' with evidence '2 to 6 September 1666' -> 'September 1666'), trimmed to the differing
   words with the claim's approximators kept ('about 587' -> 'about 687'), and as given;
2. claim slots no evidence supports, replaced by a same-type slot of a well-aligned evidence
   sentence that the claim lacks (when the sentence is only unsupported: numbers and dates in
   the same role, never the subject);
3. anchored substitutions: a short run of words where the claim and an aligned evidence
   sentence differ between matching words ('flows out of' / 'flows into'), or a negation one
   side has and the other lacks.
Candidates that change a number into a non-number, a name into a lower-case word, or a name
into a part of itself, or that touch the number of a name ('Sputnik 1'), are dropped.

Each revision draws all its changes from one evidence sentence. With a ``gate``
(``middleware.revise.gate``) a revision is returned only if the gate accepts it; a refused
revision's evidence sentence is left out of the next attempt.

Each round verifies up to ``max_candidates`` candidates together with the configured verifier
and keeps the best that improves the verdict (the verifier's own mismatches first; then label;
fewer contradicted or unsupported slots; P(attributable) when attributable; the more trusted
source; the smaller edit). Another round
runs only while the sentence stays contradicted (several wrong slots). The revision is kept
only if the final verdict reaches ``target`` ('better': an improvement as above, 'attributable')
and no slot is newly unsupported: a lenient verifier must not wave through an edit that merely
breaks the alignment.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from rapidfuzz.distance import Levenshtein
from spacy.lang.en.stop_words import STOP_WORDS

from middleware.pipeline.alignment import Aligned, Aligner, sentences_of_passages
from middleware.pipeline.lexicon import ANAPHORS, NEGATORS
from middleware.text.evidence_sentences import split_sentences
from middleware.pipeline.slots import Slot, analyse, analyse_many, role_similarity, slots_agree
from middleware.pipeline.verifiers.base import DetailedVerdict, Verifier
from middleware.pipeline.editing import EditResult
from middleware.revise.edits import EditBuffer, classify, tokens
from middleware.revise.gate import EditGate
from middleware.revise.guards import EditGuard
from middleware.revise.values import name_run, value_problem
from middleware.types import Passage, TagType, Verdict

log = logging.getLogger(__name__)

_RANK = {"contradictory": 0, "extrapolatory": 1, "attributable": 2}
_APPROX = (
    "about", "around", "roughly", "approximately", "nearly", "almost", "some", "circa", "c.", "over", "under",
    "just", "more than", "less than", "fewer than", "up to", "at least", "at most", "some", "an estimated",
)  # fmt: skip
_SOURCES = ("mismatch", "slot", "anchor")  # most trusted first
P_ATTR_TIE = 0.1
"""Attributable candidates whose P(attributable) is within this of the best count as tied."""
_YEAR = re.compile(r"\b1[0-9]{3}\b|\b20[0-9]{2}\b")
_POSSESSIVE = re.compile(r"['’]s$")
_THE_BEFORE = re.compile(r"\b[Tt]he\s+$")


@dataclass(frozen=True)
class Candidate:
    """Replace ``current[start:end]`` by ``replacement``, grounded in passage ``evidence_index``."""

    start: int
    end: int
    replacement: str
    tag: TagType
    evidence_index: int | None
    evidence: str | None  # the evidence sentence
    source: str  # mismatch | slot | anchor


class SlotsEditor:
    name = "slots"

    def __init__(
        self,
        verifier: Verifier,
        *,
        aligner: Aligner | None = None,
        guard: EditGuard | None = None,
        max_candidates: int = 6,
        max_rounds: int = 3,
        top_lines: int = 3,
        min_align: float = 0.3,
        target: str = "better",
        min_gain: float = 0.02,
        gate: EditGate | None = None,
        max_attempts: int = 3,
    ) -> None:
        self.gate = gate
        self.max_attempts = max_attempts
        self.min_gain = min_gain
        if target not in ("attributable", "better"):
            raise ValueError(f"target must be 'attributable' or 'better', not {target!r}")
        self.target = target
        self.verifier = verifier
        self.aligner = aligner or Aligner()
        self.guard = guard or EditGuard()
        self.max_candidates = max_candidates
        self.max_rounds = max_rounds
        self.top_lines = top_lines
        self.min_align = min_align

    async def edit(
        self,
        sentence: str,
        verdict: DetailedVerdict | Verdict,
        evidence: list[Passage],
        context: str | None = None,
    ) -> EditResult:
        """The best revision the gate accepts: when the gate refuses a revision, the next
        try leaves out the evidence sentence it came from (at most ``max_attempts`` tries).
        The sentence is then also verified without it: another sentence that contradicts it
        may ground the same correction better ('She received the 1911 Nobel Prize in
        Chemistry alone' after 'Marie Curie received the 1911 Nobel Prize in Chemistry for the
        discovery of radium', whose 'for the discovery' the NLI cannot find in the claim), but
        never another one (without the Chemistry sentence, the Physics sentence's 1903
        'contradicts' the Chemistry claim too)."""
        refused: set[str] = set()
        refused_texts: set[str] = set()
        last_refusal: EditResult | None = None
        for attempt in range(self.max_attempts if self.gate is not None else 1):
            result = None
            if attempt and isinstance(verdict, DetailedVerdict) and verdict.mismatches:
                result = await self._corroborated(sentence, evidence, context, refused, refused_texts)
            if result is None:
                result = await self._revise(sentence, verdict, evidence, context, refused)
            if self.gate is None or not result.changed:
                return last_refusal or result
            revision = await self.gate.review(result, evidence, context)
            if revision.status == "applied":
                return replace(result, revision=revision)
            # the report names the best candidate's refusal, not that of a later, lesser one
            last_refusal = last_refusal or EditResult.flagged(sentence, revision, self.name)
            if revision.evidence_sentence is None:
                break
            refused.add(revision.evidence_sentence)
            refused_texts.add(result.text)
        return last_refusal or EditResult.unchanged(sentence, "no candidate edit improved the verdict", self.name)

    async def _corroborated(
        self, sentence: str, evidence: list[Passage], context: str | None, refused: set[str], texts: set[str]
    ) -> EditResult | None:
        """A refused correction (one of ``texts``) drawn from another evidence sentence: the
        sentence verified without the refused evidence sentences, revised from that verdict;
        None when that gives no correction or another one."""
        without = [_without(p, refused) for p in evidence]
        again = await self.verifier.verify(sentence, without, context)
        if not (isinstance(again, DetailedVerdict) and again.label == "contradictory" and again.mismatches):
            return None
        result = await self._revise(sentence, again, without, context, refused)
        return result if result.changed and result.text in texts else None

    async def _revise(
        self,
        sentence: str,
        verdict: DetailedVerdict | Verdict,
        evidence: list[Passage],
        context: str | None,
        refused: set[str],
    ) -> EditResult:
        buffer = EditBuffer(sentence)
        current: Verdict = verdict
        tried: set[str] = {sentence}
        grounding: str | None = None  # every change of one revision comes from one evidence sentence
        for _ in range(self.max_rounds):
            candidates = await self.candidates(buffer.text, current, evidence)
            candidates = [c for c in candidates if c.evidence not in refused]
            if grounding is not None:
                candidates = [c for c in candidates if c.evidence == grounding]
            best = await self._best(buffer, current, candidates, evidence, context, tried)
            if best is None:
                break
            candidate, current = best
            grounding = candidate.evidence
            buffer.replace(
                candidate.start, candidate.end, candidate.replacement, tag=candidate.tag,
                evidence_index=candidate.evidence_index, evidence=candidate.evidence,
                evidence_id=evidence[candidate.evidence_index].id if candidate.evidence_index is not None else None,
            )  # fmt: skip
            if current.label != "contradictory":
                break
        reason = "no candidate edit improved the verdict"
        if not buffer.changes or not self._reached(sentence, verdict, buffer.text, current):
            return EditResult.unchanged(sentence, reason, self.name)
        return buffer.result(self.name, reason, current)

    def _reached(self, sentence: str, before: Verdict, edited: str, after: Verdict) -> bool:
        if self.target == "attributable":
            return after.label == "attributable" and not _new_unsupported(sentence, before, edited, after)
        return self._improves(sentence, before, edited, after)

    def _improves(self, before_text: str, before: Verdict, after_text: str, after: Verdict) -> bool:
        """A higher label; or, still contradicted, some of the contradicted slots fixed and
        none added (a contradiction that no longer names its slots is no progress); or, still
        unsupported, fewer unsupported slots or P(attributable) up by ``min_gain``. Never a
        newly unsupported slot."""
        if _new_unsupported(before_text, before, after_text, after):
            return False
        old_rank, new_rank = _RANK.get(before.label, -1), _RANK.get(after.label, -1)
        if new_rank != old_rank:
            return new_rank > old_rank
        if after.label == "contradictory":
            old, new = _slot_texts(before_text, before, "mismatches"), _slot_texts(after_text, after, "mismatches")
            if old is None or new is None:
                return False
            # fewer contradicted slots; or none left and only an unlocalised NLI doubt, which the
            # gate (NLI on the one evidence sentence) settles, when the editor has a gate
            return (bool(new) and new < old) or (bool(old) and not new and self.gate is not None)
        old, new = _unsupported(before_text, before), _unsupported(after_text, after)
        if old is not None and new is not None and new < old:
            return True
        return _p_attr(after) >= _p_attr(before) + self.min_gain

    async def _best(
        self,
        buffer: EditBuffer,
        verdict: Verdict,
        candidates: list[Candidate],
        evidence: list[Passage],
        context: str | None,
        tried: set[str],
    ) -> tuple[Candidate, Verdict] | None:
        """The best of the first ``max_candidates`` admissible candidates that improve on
        ``verdict``: best state, then (when attributable) P(attributable) within
        ``P_ATTR_TIE`` of the best, then the more trusted source, then the smaller edit."""
        current = buffer.text
        admissible: list[tuple[int, Candidate, str]] = []
        for order, candidate in enumerate(candidates):
            text = current[: candidate.start] + candidate.replacement + current[candidate.end :]
            if text in tried or self.guard.check(buffer.original, text) is not None:
                continue
            tried.add(text)
            admissible.append((order, candidate, text))
            if len(admissible) >= self.max_candidates:
                break
        # verified together, so a model-backed verifier batches the candidates' inferences
        verdicts = await asyncio.gather(*(self.verifier.verify(text, evidence, context) for _, _, text in admissible))
        improving = [
            (order, candidate, text, after)
            for (order, candidate, text), after in zip(admissible, verdicts, strict=True)
            if self._improves(current, verdict, text, after)
        ]
        if not improving:
            return None
        top_p = max(_p_attr(after) for *_, after in improving)

        def key(item: tuple[int, Candidate, str, Verdict]) -> tuple:
            order, candidate, text, after = item
            # P(attributable) only separates candidates that differ by more than P_ATTR_TIE:
            # a near tie goes to the smaller edit (a fixed rounding grid split 0.649 / 0.661)
            confident = after.label == "attributable" and _p_attr(after) > top_p - P_ATTR_TIE
            distance = Levenshtein.distance(current, text)
            # the verifier's own mismatch comes first: its value is from the sentence about the
            # claim's event, where a slot of another sentence may be any value of its type that the
            # passage happens to state ('in 1932' -> 'in 2 October 1869', from the birth sentence)
            mismatch = candidate.source == "mismatch"
            return (mismatch, _state(text, after), confident, -_SOURCES.index(candidate.source), -distance, -order)

        _, candidate, _, after = max(improving, key=key)
        return candidate, after

    async def candidates(self, sentence: str, verdict: Verdict, evidence: list[Passage]) -> list[Candidate]:
        """Candidate edits of ``sentence``, most minimal and best grounded first."""
        out: list[Candidate] = []
        if isinstance(verdict, DetailedVerdict) and verdict.label == "contradictory":
            out += _mismatch_candidates(sentence, verdict, evidence)
        aligned = await self.aligner.align(sentence, sentences_of_passages(evidence), self.top_lines)
        lines = [a for a in aligned if a.score >= self.min_align]
        if lines:
            unsupported = set(verdict.unsupported) if isinstance(verdict, DetailedVerdict) else None
            out += _slot_candidates(sentence, verdict, unsupported, lines)
            out += _anchor_candidates(sentence, lines)
        # a value the evidence gives to another verb than the claim's is no replacement for it
        # (the gate's rule value_of_the_role, unless it is switched off)
        check = self.gate is None or self.gate.enabled("value_of_the_role")
        return [
            c for c in _dedupe(sentence, out)
            if c.evidence is None or not check
            or value_problem(sentence[c.start : c.end], sentence, c.replacement, c.evidence) is None
        ]  # fmt: skip


def _without(passage: Passage, sentences: set[str]) -> Passage:
    """The passage with the given sentences left out (the others keep their text)."""
    text = passage.text
    for sentence in sentences:
        text = text.replace(sentence, "")
    return passage if text == passage.text else passage.model_copy(update={"text": text})


def _state(sentence: str, verdict: Verdict) -> tuple[int, int, int]:
    """Orders verdicts: label, then fewer slot mismatches, then fewer unsupported slots."""
    if not isinstance(verdict, DetailedVerdict):
        return (_RANK.get(verdict.label, -1), 0, 0)
    return (_RANK.get(verdict.label, -1), -len(verdict.mismatches), -len(verdict.unsupported))


def _p_attr(verdict: Verdict) -> float:
    return verdict.scores.get("attributable", 0.0)


def _slot_texts(sentence: str, verdict: Verdict, field: str) -> set[str] | None:
    if not isinstance(verdict, DetailedVerdict):
        return None
    return {m.text.lower() for m in getattr(verdict, field)}


def _unsupported(sentence: str, verdict: Verdict) -> set[str] | None:
    if not isinstance(verdict, DetailedVerdict):
        return None
    return {sentence[s:e].lower() for s, e in verdict.unsupported}


def _new_unsupported(before: str, before_verdict: Verdict, after: str, after_verdict: Verdict) -> int:
    """How many slots the edited sentence leaves unsupported that were not unsupported
    before (0 when either verdict does not list them)."""
    old, new = _unsupported(before, before_verdict), _unsupported(after, after_verdict)
    if old is None or new is None:
        return 0
    return len(new - old)


def _compatible(span: str, replacement: str) -> bool:
    """A number stays a number of the same dimension, a name stays a name, and a part of
    the span is no replacement for it ('Auguste Rodin' -> 'Auguste'), unless what goes is a
    negation ('is not' -> 'is')."""
    if not replacement.strip():
        return False
    old_words, new_words = {w.lower() for w in span.split()}, {w.lower() for w in replacement.split()}
    if new_words < old_words and not (old_words - new_words) <= NEGATORS:
        return False
    old_slot, new_slot = _slot_of(span), _slot_of(replacement)
    if old_slot is not None and old_slot.kind != "entity":
        return new_slot is not None and new_slot.kind != "entity" and _dimension(old_slot) == _dimension(new_slot)
    if span[:1].isupper() and not replacement[:1].isupper():
        return False
    return True


def _slot_of(text: str) -> Slot | None:
    slots = analyse(text).slots
    return slots[0] if len(slots) == 1 else None


def _dimension(slot: Slot) -> str:
    """Comparable kind of a number or date; a bare year counts as a date."""
    if slot.group == "date" or (slot.group == "quantity:bare" and _YEAR.fullmatch(slot.text.strip())):
        return "date"
    return slot.group


def _in_name(sentence: str, start: int, end: int) -> bool:
    """A short number right after a capitalised word is part of a name ('Sputnik 1',
    'Apollo 11'), not a count; unless it counts the noun after it ('orbited the Earth 17
    times')."""
    span = sentence[start:end].strip()
    before = sentence[:start].split()
    if not (span.isdigit() and len(span) <= 3 and before):
        return False
    word = before[-1].strip("-")
    if not (word[:1].isupper() and word.lower() not in STOP_WORDS):
        return False
    number = next((t for t in analyse(sentence).doc if t.idx == start), None)
    return not (number is not None and number.dep_ == "nummod" and number.head.i > number.i)


def _dedupe(sentence: str, candidates: list[Candidate]) -> list[Candidate]:
    seen: set[str] = set()
    out = []
    for c in candidates:
        text = sentence[: c.start] + c.replacement + sentence[c.end :]
        if text == sentence or text in seen or _in_name(sentence, c.start, c.end):
            continue
        if _compatible(sentence[c.start : c.end], c.replacement):
            seen.add(text)
            out.append(c)
    return out


# -- 1. the verifier's mismatches ---------------------------------------------------------


def _mismatch_candidates(sentence: str, verdict: DetailedVerdict, evidence: list[Passage]) -> list[Candidate]:
    out = []
    for m in verdict.mismatches:
        if m.replacement is None or not 0 <= m.evidence_index < len(evidence):
            continue
        passage = evidence[m.evidence_index].text
        grounding = _evidence_sentence(passage, m.evidence_span)
        before = passage[: m.evidence_span[0]] if m.kind == "entity" and m.evidence_span else None
        variants = span_variants(sentence, m.span[0], m.span[1], m.replacement, before)
        if m.kind == "entity":  # a whole name for a whole name too: 'Gemini 12' -> 'Gemini 8' ('12' alone is a name's number)
            variants = list(dict.fromkeys([*variants, (m.span[0], m.span[1], m.replacement), *_whole_names(
                sentence, m.span[0], m.span[1], grounding, m.replacement)]))  # fmt: skip
        for start, end, new in variants:
            out.append(Candidate(start, end, new, m.tag, m.evidence_index, grounding, "mismatch"))
    return out


def _whole_names(sentence: str, start: int, end: int, evidence: str, replacement: str) -> list[tuple[int, int, str]]:
    """The whole capitalised name around the claim's span for the whole name around the
    replacement in the evidence sentence, where the NER cut either short ('Washington
    Monument' -> 'Lincoln Memorial' where the mismatch had only 'Memorial')."""
    claim = name_run(sentence, start, end - start)
    at = evidence.find(replacement)
    stated = name_run(evidence, at, len(replacement)) if at >= 0 else ""
    first = sentence.find(claim, max(0, end - len(claim))) if claim else -1
    if not stated or not 0 <= first <= start or first + len(claim) < end or (claim, stated) == (sentence[start:end], replacement):
        return []
    return [(first, first + len(claim), stated)]


def _evidence_sentence(text: str, span: tuple[int, int] | None) -> str:
    if span is None:
        return text
    for start, end in split_sentences(text):
        if start <= span[0] < end:
            return text[start:end]
    return text


def span_variants(
    sentence: str, start: int, end: int, replacement: str, before: str | None = None
) -> list[tuple[int, int, str]]:
    """Ways to put ``replacement`` in place of ``sentence[start:end]``, most minimal first:
    projected on the claim's words, trimmed with the claim's approximator kept, as given.
    The claim's possessive stays; with ``before`` (the evidence text preceding an entity
    replacement) the determiner follows the evidence ('The Atlantic Ocean' -> 'Europe')."""
    if _POSSESSIVE.search(sentence[start:end]) and not _POSSESSIVE.search(replacement):
        end -= 2
    if before is not None:
        start, replacement = _determiner(sentence, start, replacement, before)
    span = sentence[start:end]
    lead = _approximator(span)
    inner_start = start + lead
    new = replacement[_approximator(replacement) :] if lead or not _approximator(span) else replacement
    out = []
    if _YEAR.fullmatch(span.strip()) and (year := _YEAR.search(new)) and year.group() != span.strip():
        out.append((start, end, year.group()))  # a bare year stays a bare year
    projected = _project(sentence[inner_start:end], new)
    if projected is not None:
        out.append(trim(sentence, inner_start, end, projected))
    out.append(trim(sentence, inner_start, end, new))
    out.append(trim(sentence, start, end, replacement))
    return list(dict.fromkeys(out))


def _determiner(sentence: str, start: int, replacement: str, before: str) -> tuple[int, str]:
    """Take or drop 'the' before an entity as the evidence has it."""
    claim_the = _THE_BEFORE.search(sentence[:start])
    evidence_the = _THE_BEFORE.search(before)
    if claim_the and not evidence_the:
        start = claim_the.start()
    elif evidence_the and not claim_the:
        replacement = "the " + replacement
    else:
        return start, replacement
    if not sentence[:start].strip():
        replacement = replacement[:1].upper() + replacement[1:]
    return start, replacement


def _approximator(text: str) -> int:
    """Length of a leading approximator ('about ', 'more than ') of ``text``, else 0."""
    lower = text.lower()
    for word in sorted(_APPROX, key=len, reverse=True):
        if lower.startswith(word + " "):
            return len(word) + 1
    return 0


def _project(span: str, replacement: str) -> str | None:
    """``span`` with only the words the replacement substitutes changed, ignoring detail the
    replacement adds ('September 1606' + '2 to 6 September 1666' -> 'September 1666');
    None unless the two share a word."""
    a, b = _words(span), _words(replacement)
    ops = difflib.SequenceMatcher(None, [span[s:e].lower() for s, e in a], [replacement[s:e].lower() for s, e in b],
                                  autojunk=False).get_opcodes()  # fmt: skip
    if not any(op == "equal" for op, *_ in ops) or not any(op == "replace" for op, *_ in ops):
        return None
    out, at = [], 0
    for op, i1, i2, j1, j2 in ops:
        if op != "replace":
            continue
        out += [span[at : a[i1][0]], replacement[b[j1][0] : b[j2 - 1][1]]]
        at = a[i2 - 1][1]
    return "".join(out) + span[at:]


def _words(text: str) -> list[tuple[int, int]]:
    return [(s, e) for s, e in tokens(text) if text[s:e].strip()]


def trim(sentence: str, start: int, end: int, new: str) -> tuple[int, int, str]:
    """Shrink a replacement by the words it shares at either end with the replaced span."""
    span = sentence[start:end]
    a, b = _words(span), _words(new)
    lo = 0
    while lo < min(len(a), len(b)) - 1 and span[slice(*a[lo])] == new[slice(*b[lo])]:
        lo += 1
    hi = 0
    while hi < min(len(a), len(b)) - lo - 1 and span[slice(*a[-1 - hi])] == new[slice(*b[-1 - hi])]:
        hi += 1
    if not a or not b or (lo == 0 and hi == 0):
        return start, end, new
    a_start, a_end = a[lo][0], a[len(a) - 1 - hi][1]
    b_start, b_end = b[lo][0], b[len(b) - 1 - hi][1]
    return start + a_start, start + a_end, new[b_start:b_end]


# -- 2. unsupported slots ------------------------------------------------------------------


def _slot_candidates(
    sentence: str, verdict: Verdict, unsupported: set[tuple[int, int]] | None, lines: list[Aligned]
) -> list[Candidate]:
    """Unsupported claim slots -> same-type evidence slots the claim lacks. When the
    sentence is only unsupported (not contradicted), only numbers and dates in the same
    role are tried, and never the subject: an entity the evidence does not name is usually
    referred to by a pronoun there, not wrong."""
    claim = analyse(sentence)
    contradicted = verdict.label == "contradictory"
    parsed = analyse_many([line.sentence.text for line in lines])
    found: list[tuple[float, Slot, Slot, Aligned]] = []
    for slot in claim.slots:
        if unsupported is not None and (slot.start, slot.end) not in unsupported:
            continue
        if not contradicted and (slot.kind == "entity" or _in_subject(claim.subject, slot)):
            continue
        others = [c for c in claim.slots if c is not slot]
        for line, analysis in zip(lines, parsed, strict=True):
            if unsupported is None and any(slots_agree(slot, e) for e in analysis.slots):
                break  # supported after all
            for e in analysis.slots:
                if slots_agree(slot, e) is not False or e.group != slot.group or any(slots_agree(c, e) for c in others):
                    continue
                role = role_similarity(slot, e)
                if contradicted or role >= 2.0:
                    found.append((role + line.score, slot, e, line))
    found.sort(key=lambda item: -item[0])
    out = []
    for _, slot, e, line in found:
        before = line.sentence.text[: e.start] if e.kind == "entity" else None
        for start, end, new in span_variants(sentence, slot.start, slot.end, e.text, before):
            out.append(Candidate(start, end, new, "entity", line.sentence.passage_index, line.sentence.text, "slot"))
    return out


def _in_subject(subject: tuple[int, int] | None, slot: Slot) -> bool:
    return subject is not None and subject[0] <= slot.start and slot.end <= subject[1]


# -- 3. anchored substitutions ---------------------------------------------------------------


def _anchor_candidates(
    sentence: str, lines: Sequence[Aligned], max_claim: int = 3, max_evidence: int = 6, max_words: int = 3
) -> list[Candidate]:
    """Where the claim and an aligned evidence sentence differ in a short run of words
    between matching words: at least three matching words around it, two of them content
    words (at the start or end of the sentence, one side suffices). When both runs hold
    a slot of the same type, only the slot is replaced; otherwise the evidence's run (at
    most ``max_words`` words, bringing no entity, number or date where the claim's run has
    none) replaces the claim's."""
    out = []
    claim_slots = analyse(sentence).slots
    for line in lines:
        ev = line.sentence.text
        a, b = _words(sentence), _words(ev)
        a_low, b_low = [sentence[s:e].lower() for s, e in a], [ev[s:e].lower() for s, e in b]
        ops = difflib.SequenceMatcher(None, a_low, b_low, autojunk=False).get_opcodes()
        for k, (op, i1, i2, j1, j2) in enumerate(ops):
            if op == "equal" or not _anchored(ops, k, a_low):
                continue
            changed, incoming = set(a_low[i1:i2]), set(b_low[j1:j2])
            if op != "replace" and not (changed | incoming) <= NEGATORS:
                continue
            if i2 - i1 > max_claim or j2 - j1 > max_evidence or (incoming and incoming <= ANAPHORS):
                continue
            start = a[i1][0] if i2 > i1 else a[i1 - 1][1]
            end = a[i2 - 1][1] if i2 > i1 else start
            ev_start, ev_end = (b[j1][0], b[j2 - 1][1]) if j2 > j1 else (0, 0)
            new = ev[ev_start:ev_end]
            if any(ch in new for ch in ".;:!?"):
                continue
            grounding = line.sentence.passage_index, ev
            pair = _slot_pair(claim_slots, start, end, ev, ev_start, ev_end)
            if pair is not None:
                (s_start, s_end), e = pair
                for c_start, c_end, c_new in span_variants(sentence, s_start, s_end, e.text, ev[: e.start]):
                    out.append(Candidate(c_start, c_end, c_new, "entity", *grounding, "anchor"))
                continue
            brings_slot = any(e.start < ev_end and ev_start < e.end for e in analyse(ev).slots)
            if j2 - j1 > max_words or (brings_slot and not any(c.start < end and start < c.end for c in claim_slots)):
                continue  # a few words, and no entity, number or date where the claim had none
            if i1 == 0 and new[:1].islower() and sentence[:1].isupper():
                new = new[:1].upper() + new[1:]
            start, end, new = _spaced(sentence, start, end, new)
            out.append(Candidate(start, end, new, classify(sentence, start, end, new), *grounding, "anchor"))
    return out


def _anchored(ops: list[tuple[str, int, int, int, int]], k: int, a_low: list[str]) -> bool:
    """Matching runs on both sides of ops[k] (one side at the sentence's start or end) with
    at least three words, two of them content words."""
    left = ops[k - 1] if k > 0 else None
    right = ops[k + 1] if k + 1 < len(ops) else None
    sides = [op for op in (left, right) if op is not None]
    if any(op[0] != "equal" for op in sides) or not sides:
        return False
    if len(sides) == 1 and not (k == 0 or k == len(ops) - 1):
        return False
    words = [w for op in sides for w in a_low[op[1] : op[2]] if any(ch.isalnum() for ch in w)]
    return len(words) >= 3 and sum(1 for w in words if w not in STOP_WORDS) >= 2


def _slot_pair(
    claim_slots: Sequence[Slot], start: int, end: int, evidence: str, ev_start: int, ev_end: int
) -> tuple[tuple[int, int], Slot] | None:
    """The claim slot inside [start, end) and the evidence slot of the same type inside
    [ev_start, ev_end), if there is exactly one of each."""
    inside = [s for s in claim_slots if start <= s.start and s.end <= end]
    if len(inside) != 1 or ev_end <= ev_start:
        return None
    theirs = [e for e in analyse(evidence).slots if ev_start <= e.start and e.end <= ev_end and e.group == inside[0].group]
    if len(theirs) != 1:
        return None
    return (inside[0].start, inside[0].end), theirs[0]


def _spaced(sentence: str, start: int, end: int, new: str) -> tuple[int, int, str]:
    """An insertion gets a separating space; a deletion takes one adjacent space with it."""
    if start == end and new:
        return start, end, " " + new
    if not new and end < len(sentence) and sentence[end] == " ":
        return start, end + 1, new
    if not new and start > 0 and sentence[start - 1] == " ":
        return start - 1, end, new
    return start, end, new
