"""The offline slots verifier: align the claim with evidence sentences, then compare the
claim's normalised slots (entities with aliases, numbers with units, dates by granularity,
negation, a few antonym relations) with the slots of the aligned sentences.

- every key slot supported, the relation present, the claim's words covered -> attributable
- a slot of the same type that differs, in a well-aligned sentence about the same subject
  and the same event (of the aligned sentences, one that states the most of the claim's
  other slots and its verb: the Chemistry prize, not the Physics prize), in the same role
  -> contradictory, with the evidence's slot as the suggested replacement; also when the
  claim's value is stated only outside that event (a weakly aligned sentence, the rest of
  the passage: 'four voyages' does not support 'left Palos ... with four ships')
- a participant in another role than the evidence gives it (who did what to whom: 'Aldrin
  remained in orbit' where the evidence says Collins remained and Aldrin was carried down)
  -> contradictory, flagged without a replacement; also a name the evidence states only for
  another verb while its document gives the claim's verb another name ('born in Wilmslow'
  against 'died in Wilmslow' and 'born in Maida Vale')
- otherwise -> extrapolatory (the unsupported slots are listed)
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

from spacy.lang.en.stop_words import STOP_WORDS
from spacy.tokens import Token

from middleware.evidence.lexical import stem, term_recall, terms
from middleware.pipeline.alignment import Aligned, Aligner, sentences_of_passages
from middleware.pipeline.lexicon import ANAPHORS, NAME_WORD
from middleware.pipeline.names import mentions, names_match
from middleware.pipeline.slots import (
    Analysis,
    Relation,
    Slot,
    analyse,
    analyse_many,
    clause_subject,
    clause_subject_token,
    named_subject,
    participants,
    role_similarity,
    slots_agree,
)
from middleware.pipeline.verifiers.base import DetailedVerdict, Mismatch, scores_for
from middleware.pipeline.verifiers.fields import (
    FIELD_RULES,
    GivenNumber,
    field_mismatches,
    field_value_mismatches,
    given_numbers,
    is_record,
)
from middleware.pipeline.verifiers.hours import HOURS_RULES, HoursReading, read_hours
from middleware.types import Passage, RuleFinding

log = logging.getLogger(__name__)

_LIGHT_VERBS = frozenset({"be", "have", "do", "make", "take", "get", "become", "say", "include", "use"})
_ANTONYM_PAIRS = (
    ("win", "lose"), ("increase", "decrease"), ("rise", "fall"), ("gain", "lose"), ("accept", "reject"),
    ("allow", "ban"), ("allow", "forbid"), ("permit", "prohibit"), ("include", "exclude"), ("open", "close"),
    ("approve", "reject"), ("confirm", "deny"), ("succeed", "fail"), ("start", "end"), ("begin", "end"),
    ("join", "leave"), ("buy", "sell"), ("enter", "exit"), ("expand", "shrink"), ("support", "oppose"),
    ("arrive", "depart"), ("hire", "fire"), ("acquire", "sell"), ("grow", "shrink"), ("pass", "fail"),
)  # fmt: skip
_ANTONYMS: dict[str, set[str]] = {}
for _a, _b in _ANTONYM_PAIRS:
    _ANTONYMS.setdefault(_a, set()).add(_b)
    _ANTONYMS.setdefault(_b, set()).add(_a)
_STOP_OBJECTS = frozenset({"part", "one", "member", "kind", "type", "thing", "something", "someone", "lot"})
_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass"})
_MARKERS = (
    " not ", "n't ", " never ", " no ", " only ", " yet to ", " other than ", " except ", " barely ", " hardly ",
    " outside ", " without ", " neither ", " nor ", " none ", " nobody ", " nothing ", " incapable ", " unable ",
    " refused ", " failed ", " lack ", " exclusively ", " solely ", " always ", " every ",
)  # fmt: skip
_ACTORS = frozenset({"PERSON", "ORG", "NORP", "GPE", "LOC", "FAC", "PROPN"})
"""Entities whose role in an event can be swapped (people, organisations, nations, and
proper nouns the small NER model left unlabelled or mislabels from one sentence to the next)."""
_KIND_PRIORITY = {"number": 0, "quantity": 0, "date": 0, "negation": 1, "relation": 1, "role": 1, "entity": 2}


@dataclass(frozen=True)
class _Line:
    """An aligned evidence sentence with its parse."""

    aligned: Aligned
    analysis: Analysis

    @property
    def score(self) -> float:
        return self.aligned.score

    def offset(self, start: int, end: int) -> tuple[int, int]:
        """Sentence offsets -> passage offsets."""
        base = self.aligned.sentence.start
        return base + start, base + end


_Found = tuple[Mismatch, _Line]

RULES: dict[str, str] = {
    "value_in_event": "a number, date or name of the claim that the sentence about the claim's event, about the "
    "same subject, states otherwise in the same role",
    "value_in_same_words": "a name that an aligned sentence replaces by another in otherwise the same words",
    "negation": "the claim's verb negated on one side only, about the same objects",
    "antonym": "an opposite verb (sold / bought) about the same objects",
    "role_swap": "a participant the evidence gives another role in the claim's event",
    "role_exchange": "two participants the claim names in each other's roles: the evidence sentence names the "
    "claim's participant and gives its role to another participant of the claim (role_swap's strict case; it "
    "stands against the learned decision)",
    "verb_of_another": "a name the evidence states only for another verb, while its document gives the claim's "
    "verb another name (born / died in)",
    "gap_relation": "support needs the claim's verb with its objects in the evidence",
    "gap_polarity": "support needs the same negation and exclusivity words on both sides",
    "gap_coverage": "support needs most of the claim's content words in the aligned evidence",
    **FIELD_RULES,
    **HOURS_RULES,
}
"""The slots verifier's rules by name: each is switched off by ``pipeline.rules.disabled``
and recorded in a verdict's ``rules`` when it fires. The gaps only block support."""


def _named(found: _Found, rule: str) -> _Found:
    mismatch, line = found
    return mismatch.model_copy(update={"rule": rule}), line


class SlotsVerifier:
    """Offline verifier. ``aligner`` holds the (optional) embedder; thresholds are on the
    fused alignment score (0..1)."""

    name = "slots"

    def __init__(
        self,
        aligner: Aligner | None = None,
        *,
        top_k: int = 4,
        min_align: float = 0.3,
        strong_align: float = 0.45,
        min_coverage: float = 0.7,
        disabled: Iterable[str] = (),
    ) -> None:
        self.aligner = aligner or Aligner()
        self.top_k = top_k
        self.min_align = min_align
        self.strong_align = strong_align
        self.min_coverage = min_coverage
        self.disabled = frozenset(disabled)
        unknown = self.disabled - set(RULES)
        if unknown:
            raise ValueError(f"unknown verifier rule(s) {sorted(unknown)}; the rules are {sorted(RULES)}")

    def enabled(self, rule: str) -> bool:
        return rule not in self.disabled

    async def verify(
        self, claim: str, evidence: list[Passage], context: str | None = None
    ) -> DetailedVerdict:
        aligned = await self.aligner.align(claim, sentences_of_passages(evidence), self.top_k)
        return self.judge(claim, aligned, evidence)

    def judge(
        self, claim: str, aligned: list[Aligned], evidence: list[Passage] | None = None
    ) -> DetailedVerdict:
        """Decide from already aligned sentences (best first); a field of structured evidence
        that the claim states otherwise decides first (``fields.py``), with the claim's
        unsupported slots as the sentences leave them (an edit of the field's value must not
        leave more)."""
        if not evidence:
            return self._judge_sentences(claim, aligned, evidence, [])
        given, hours = given_numbers(claim, evidence), read_hours(claim, evidence)
        verdict = self._judge_sentences(claim, aligned, evidence, [(g.start, g.end) for g in given if g.held] + hours.held)
        if fields := self._field_findings(claim, evidence, given, hours):
            return self._field_verdict(fields, evidence, verdict.unsupported)
        return verdict

    def _judge_sentences(
        self, claim: str, aligned: list[Aligned], evidence: list[Passage] | None, held: list[tuple[int, int]]
    ) -> DetailedVerdict:
        """The claim's slots against the aligned evidence sentences; ``held``, the numbers
        that a numeric field of the evidence's data holds ("4.0 stars", ``fields.given_numbers``)
        and the ranges its schedule gives those days (``hours.read_hours``), are supported by
        the data, whatever the sentences say."""
        analysis = analyse(claim)
        analysis = analysis.without_slots(held) if held else analysis
        usable = [a for a in aligned if a.score >= self.min_align]
        if not usable:
            return self._verdict(
                "extrapolatory", 0.7, None, reason="no evidence sentence aligns with the claim",
                unsupported=[(s.start, s.end) for s in analysis.slots],
            )  # fmt: skip
        texts = [a.sentence.text for a in usable]
        lines = [_Line(a, e) for a, e in zip(usable, analyse_many(texts), strict=True)]
        # a passage's title is part of what it says: a chunk about 'William Shakespeare' that
        # only says 'His works include ...' still names him
        passages = [f"{p.title}. {p.text}" if p.title else p.text for p in evidence] if evidence else None
        support = {s: ln for s in analysis.slots if (ln := _first_support(s, lines, passages)) is not None}
        unsupported = [s for s in analysis.slots if s not in support]
        return self._contradicted(analysis, lines, support, unsupported, evidence) or self._supported(
            analysis, lines, support, unsupported
        )

    def _contradicted(
        self,
        claim: Analysis,
        lines: list[_Line],
        support: dict[Slot, _Line],
        unsupported: list[Slot],
        evidence: list[Passage] | None = None,
    ) -> DetailedVerdict | None:
        # a record's line ("name: Kogilicious; address: 956 ...; business stars: 4.0") is no event
        # sentence: its values belong to their fields, and read as one sentence '956' (an address)
        # contradicted '4.0 out of 5 stars' and was put in by correct mode; field_polarity reads records
        prose = [line for line in lines if not is_record(line.aligned.sentence.text)]
        event_lines = _event_lines(claim, prose)
        # the topic of the event sentence's own passage, not of another passage ('Vostok 1', the
        # title of Gagarin's flight, does not make 'aboard Vostok 1' Tereshkova's)
        titles = _titles(event_lines, evidence)
        # A value stated only outside the claim's event, in a weakly aligned sentence or elsewhere
        # in the passage ('four voyages' for 'with four ships', '15 major championships' for 'by
        # 15 strokes'), does not outweigh the event's own value. A name must be stated by the
        # event's own sentence: another sentence naming it speaks of another event ('Nobile's
        # airship Italia' for 'flew over the North Pole in the airship Italia'), unless it names
        # its passage's topic, which the event's sentence may call 'he' ('he and Tenzing Norgay').
        stating = [line for line in prose if line.score >= self.strong_align or line in event_lines]
        displaced = [
            s for s in support
            if not any(
                _states_slot(s, line) and not _stated_of_another(s, claim, line)
                for line in (event_lines if s.kind == "entity" else stating)
            )
            and not (s.kind == "entity" and any(_names_topic(t, s.text) for t in titles.values()))
        ]  # fmt: skip
        found: list[_Found] = []
        for s in [*unsupported, *displaced]:
            if self.enabled("value_in_event") and (m := self._conflict(s, claim, event_lines, support, evidence)):
                found.append(_named(m, "value_in_event"))
            elif self.enabled("value_in_same_words") and (m := _anchored_conflict(s, claim, prose)):
                found.append(_named(m, "value_in_same_words"))
        checks = {
            "negation": lambda: self._negation_conflict(claim, lines),
            "antonym": lambda: self._antonym_conflict(claim, lines),
            "role_swap": lambda: self._role_conflict(claim, lines, evidence),
            "role_exchange": lambda: self._role_conflict(claim, lines, evidence, exchanged=True),
            "verb_of_another": lambda: self._verb_conflict(claim, lines, support, evidence),
        }
        found += [_named(m, name) for name, check in checks.items() if self.enabled(name) and (m := check())]
        if not found:
            return None
        found.sort(key=lambda pair: (_KIND_PRIORITY[pair[0].kind], -pair[1].score))
        first, line = found[0]
        if first.kind == "role":
            reason = f"the evidence gives {first.text!r} another role in this event"
        elif first.replacement is not None:
            reason = f"evidence says {first.replacement!r} where the claim says {first.text!r}"
        else:
            reason = f"evidence disagrees on {first.text!r}"
        return self._verdict(
            "contradictory", 0.55 + 0.4 * min(line.score, 1.0), line, reason=reason, span=first.span,
            mismatches=[m for m, _ in found], unsupported=[(s.start, s.end) for s in unsupported],
        )  # fmt: skip

    def _field_findings(
        self, claim: str, evidence: list[Passage], given: list[GivenNumber], hours: HoursReading
    ) -> list[Mismatch]:
        """What the structured data's fields say against the claim (``fields.py``, ``hours.py``)."""
        found = field_mismatches(claim, evidence) if self.enabled("field_polarity") else []
        found += field_value_mismatches(claim, evidence, given) if self.enabled("field_value") else []
        return found + (hours.mismatches if self.enabled("field_hours") else [])

    def _field_verdict(
        self, fields: list[Mismatch], evidence: list[Passage], unsupported: list[tuple[int, int]]
    ) -> DetailedVerdict:
        first = fields[0]
        passage = evidence[first.evidence_index]
        return DetailedVerdict(
            label="contradictory", scores=scores_for("contradictory", 0.9), evidence_id=passage.id,
            evidence_sentence=first.replacement, span=first.span, backend=self.name,
            reason=f"the data states {first.replacement!r} where the claim says {first.text!r}",
            evidence_index=first.evidence_index, evidence_span=first.evidence_span, mismatches=fields,
            unsupported=unsupported,
            rules=[RuleFinding(name=m.rule, span=m.span, detail=f"{m.kind}: {m.text!r}") for m in fields],
        )  # fmt: skip

    def _supported(
        self, claim: Analysis, lines: list[_Line], support: dict[Slot, _Line], unsupported: list[Slot]
    ) -> DetailedVerdict:
        coverage = _coverage(claim, lines, support) if self.enabled("gap_coverage") else 1.0
        relation_ok = _relation_supported(claim, lines, support) if self.enabled("gap_relation") else True
        markers = _missing_markers(claim, lines) if self.enabled("gap_polarity") else []
        best = max(lines, key=lambda ln: (sum(1 for v in support.values() if v is ln), ln.score))
        if not unsupported and relation_ok and not markers and coverage >= self.min_coverage:
            confidence = 0.5 + 0.45 * min(1.0, (best.score + coverage) / 2)
            return self._verdict("attributable", confidence, best, span=_claim_span(claim.text), lean=0.8)
        gaps = [
            name
            for name, missing in (
                ("relation", not relation_ok),
                ("polarity", bool(markers)),
                ("coverage", coverage < self.min_coverage),
            )
            if missing
        ]
        if unsupported:
            reason = f"not in the evidence: {', '.join(s.text for s in unsupported)}"
        elif not relation_ok and claim.relation is not None:
            reason = f"the evidence does not state {claim.relation.text!r} with its objects"
        elif markers:
            reason = f"the claim and the evidence differ on {', '.join(repr(m) for m in markers)}"
        else:
            reason = f"evidence covers {coverage:.0%} of the claim"
        return self._verdict(
            "extrapolatory", 0.55 + 0.3 * (1 - coverage), best, reason=reason,
            span=(unsupported[0].start, unsupported[0].end) if unsupported else None,
            unsupported=[(s.start, s.end) for s in unsupported], lean=min(0.9, coverage), gaps=gaps,
        )  # fmt: skip

    def _verdict(
        self,
        label: str,
        confidence: float,
        line: _Line | None,
        *,
        reason: str | None = None,
        span: tuple[int, int] | None = None,
        mismatches: list[Mismatch] | None = None,
        unsupported: list[tuple[int, int]] | None = None,
        lean: float = 0.5,
        gaps: list[str] | None = None,
    ) -> DetailedVerdict:
        sentence = line.aligned.sentence if line else None
        return DetailedVerdict(
            label=label,  # type: ignore[arg-type]
            scores=scores_for(label, confidence, lean),
            evidence_id=sentence.passage_id if sentence else None,
            evidence_sentence=sentence.text if sentence else None,
            span=span,
            reason=reason,
            backend=self.name,
            evidence_index=sentence.passage_index if sentence else None,
            evidence_span=(sentence.start, sentence.end) if sentence else None,
            mismatches=mismatches or [],
            unsupported=unsupported or [],
            gaps=gaps or [],  # type: ignore[arg-type]
            rules=[RuleFinding(name=m.rule, span=m.span, detail=f"{m.kind}: {m.text!r}") for m in mismatches or []]
            + [RuleFinding(name=f"gap_{g}") for g in gaps or []],
        )

    def _conflict(
        self, slot: Slot, claim: Analysis, lines: list[_Line], support: dict[Slot, _Line],
        evidence: list[Passage] | None = None,
    ) -> _Found | None:
        """A same-type slot with another value, in the same role, in a strongly aligned
        sentence about the same subject. A subject the evidence does not name is usually
        referred to there ('She', 'the film'): it conflicts only with another name as the
        subject of the same verb ('King Charles V moved the royal court' / 'King Philip II
        moved the royal court'). An evidence sentence whose subject is a pronoun for its
        passage's topic is about that topic ('It was designed by Margaret Hale and opened in
        1928' in a passage about the Kestrel Bridge), even when every value of the claim is
        wrong there and nothing else ties the two."""
        subject = slot.role.dep in _SUBJECT_DEPS
        if subject and slot.kind != "entity":
            return None
        for line in lines:
            # the pronoun is what keeps the topic's sentence from aligning strongly: it is
            # read at the weaker alignment the event's sentence needs anyway
            by_pronoun = not subject and _topic_subject(claim, line, evidence)
            if line.score < (self.min_align if by_pronoun else self.strong_align):
                continue
            if not (subject or by_pronoun or _same_subject(claim, line, support)):
                continue
            used = {
                e for e in line.analysis.slots for c in claim.slots if c is not slot and slots_agree(c, e)
            }
            candidates = [
                e for e in line.analysis.slots
                if e not in used and slots_agree(slot, e) is False and _same_clause(slot, e, claim, line)
            ]  # fmt: skip
            if subject:  # another name, not a part of it ('Wilbur' for 'Wilbur Wright')
                candidates = [
                    e for e in candidates
                    if e.role.dep == slot.role.dep and e.role.verb == slot.role.verb and not _part_of(e.text, slot.text)
                ]  # fmt: skip
            choice = _best_candidate(slot, candidates)
            if choice is not None:
                return Mismatch(
                    kind=slot.kind, span=(slot.start, slot.end), text=slot.text, replacement=choice.text,
                    evidence_index=line.aligned.sentence.passage_index, evidence_span=line.offset(choice.start, choice.end),
                ), line  # fmt: skip
        return None

    def _role_conflict(
        self, claim: Analysis, lines: list[_Line], evidence: list[Passage] | None, exchanged: bool = False
    ) -> _Found | None:
        """A claim participant whose role (agent, patient, from, to ... of a verb) the evidence
        gives to someone else, while naming the claim's participant too (in that sentence, or
        in its passage when the claim also names the evidence's holder of the role): swapped
        roles. Evidence pronouns stand for the passage's topic. Someone the claim already has
        in that role is no conflict ('X and Y discovered' vs 'X discovered it with Y').

        ``exchanged`` asks for the strict case: the evidence sentence itself names the claim's
        participant, and the one it gives the role to is a party to another verb of the claim
        ('... followed by Michael Collins, while Buzz Aldrin remained in lunar orbit' against
        '... carrying Armstrong and Aldrin, while Michael Collins remained in lunar orbit'), not
        a mere mention ('Newton's Principia ... set out the laws' against 'Newton set out the
        law ... in his book Principia', the planted benchmark), and the verb is no copula. On
        RAGTruth's train answers the loose case fired only on sentences people judged
        supported (a role the evidence gives to someone the claim never names is mostly a
        parse of another clause); the strict one names two people the claim has swapped."""
        parties = participants(claim)
        claimed = [
            c for c in parties
            if c.slot is not None and c.slot.label in _ACTORS and c.name.lower() not in ANAPHORS
            # a copula's sides exchange without a change of fact ('Theresa is a variation of
            # Teresa' / 'Teresa is the Spanish form of Theresa', RAGTruth train)
            and not (exchanged and c.verb in _LIGHT_VERBS)
        ]  # fmt: skip
        if not claimed:
            return None
        for line in lines:
            if line.score < self.strong_align:
                continue
            index = line.aligned.sentence.passage_index
            passage = evidence[index] if evidence is not None and index < len(evidence) else None
            topic, pronouns = _topic(passage) if passage is not None else (None, frozenset())
            stated = participants(line.analysis, topic, pronouns)
            for c in claimed:
                holders = [e for e in stated if e.verb == c.verb and e.role == c.role and e.name[:1].isupper()]
                if not holders or any(names_match(c.name, e.name) or _share_word(c.name, e.name) for e in holders):
                    continue
                others = [
                    e for e in holders
                    if not any(o.verb == c.verb and o.role == c.role and _share_word(o.name, e.name) for o in claimed)
                ]  # fmt: skip
                named = mentions(line.analysis.text, c.name) or (topic is not None and _share_word(topic, c.name))
                if exchanged:  # the evidence's holder is a party to another verb of the claim, not a mere mention
                    others = [
                        o for o in others
                        if any(_share_word(o.name, p.name) and (p.verb, p.role) != (c.verb, c.role) for p in parties)
                    ]  # fmt: skip
                    named = mentions(line.analysis.text, c.name)
                elif not named and passage is not None:  # a swap across sentences of one passage
                    swapped_in = any(mentions(claim.text, o.name) for o in others)
                    named = swapped_in and mentions(passage.text, c.name)
                if others and named:
                    holder = others[0].slot
                    span = line.offset(holder.start, holder.end) if holder is not None else None
                    assert c.slot is not None
                    return Mismatch(
                        kind="role", span=(c.slot.start, c.slot.end), text=c.slot.text, replacement=None,
                        evidence_index=index, evidence_span=span,
                    ), line  # fmt: skip
        return None

    def _verb_conflict(
        self, claim: Analysis, lines: list[_Line], support: dict[Slot, _Line], evidence: list[Passage] | None
    ) -> _Found | None:
        """A name the evidence states only for another verb, while its document gives the
        claim's verb another name in the same role: 'Alan Turing was born in Wilmslow'
        against 'Turing died in Wilmslow' and '... born in Maida Vale, London'. The verb is
        what is wrong, so it is a role mismatch: flagged, never rewritten. Without such a
        rival the name may hold for both verbs (born and died in one town), and nothing is
        decided here. The rival is looked for in the aligned sentences of that document and,
        for an event that happens once ('born', 'died': one place each), in all its
        sentences; a verb that may hold many values ('visited', 'lived in') would make any
        other value of it a false rival."""
        for slot in claim.slots:
            verb = slot.role.verb
            if slot.kind != "entity" or slot.role.dep in _SUBJECT_DEPS or slot.role.prep is None:
                continue
            if verb is None or verb in _LIGHT_VERBS or slot.role.head != verb:
                continue  # only a verb's own argument ('born in X'), not a noun's ('in honour of X')
            if any(_of_subject(claim, line.analysis, e) for line in lines for e in _names_with(slot, line, verb)):
                continue  # stated for the claim's verb ('Bannister died in Oxford' is not Hawking's)
            for line in lines:
                named = [e for e in _names_with(slot, line) if e.role.head == e.role.verb]
                if line.score < self.strong_align or not named or not _same_subject(claim, line, support):
                    continue
                if any(r.lemma == verb for r in line.analysis.relations):
                    continue  # the claim's verb is in that sentence too ('studied and taught at X')
                index = line.aligned.sentence.passage_index
                if verb in _ONCE and evidence is not None:  # every sentence of the document (the aligned ones too)
                    same = analyse_many([
                        s.text for s in sentences_of_passages(evidence) if _same_document(s.passage_index, index, evidence)
                    ])  # fmt: skip
                else:
                    same = [o.analysis for o in lines if _same_document(o.aligned.sentence.passage_index, index, evidence)]
                if any(_gives_verb_another(slot, verb, analysis, claim) for analysis in same):
                    return Mismatch(
                        kind="role", span=(slot.start, slot.end), text=slot.text, replacement=None,
                        evidence_index=index, evidence_span=line.offset(named[0].start, named[0].end),
                    ), line  # fmt: skip
        return None

    def _negation_conflict(self, claim: Analysis, lines: list[_Line]) -> _Found | None:
        main = claim.relation
        if main is None:
            return None
        for line in lines:
            if line.score < self.strong_align:
                continue
            for rel in line.analysis.relations:
                if rel.lemma == main.lemma and rel.negated != main.negated and _same_objects(main, rel):
                    span = _negated_span(claim, main)
                    evidence_span = _negated_span(line.analysis, rel)
                    return Mismatch(
                        kind="negation", span=span, text=claim.text[span[0] : span[1]],
                        replacement=line.analysis.text[evidence_span[0] : evidence_span[1]],
                        evidence_index=line.aligned.sentence.passage_index, evidence_span=line.offset(*evidence_span),
                    ), line  # fmt: skip
        return None

    def _antonym_conflict(self, claim: Analysis, lines: list[_Line]) -> _Found | None:
        main = claim.relation
        if main is None or main.lemma not in _ANTONYMS:
            return None
        for line in lines:
            if line.score < self.strong_align:
                continue
            for rel in line.analysis.relations:
                if (
                    rel.lemma in _ANTONYMS[main.lemma]
                    and rel.negated == main.negated
                    and _same_objects(main, rel)
                ):
                    return Mismatch(
                        kind="relation", span=(main.start, main.end), text=main.text, replacement=rel.text,
                        evidence_index=line.aligned.sentence.passage_index, evidence_span=line.offset(rel.start, rel.end),
                    ), line  # fmt: skip
        return None


_Topic = tuple[str | None, frozenset[str]]
_PERSONAL = re.compile(r"\b(he|she|his|her|him)\b", re.IGNORECASE)
_IMPERSONAL = re.compile(r"\b(it|its)\b", re.IGNORECASE)


def _topic(passage: Passage) -> _Topic:
    """What a passage is about (its title, else the first name of its first sentence) and the
    pronouns that stand for it: 'he'/'she' where the passage speaks of a person more than
    of a thing, else 'it'."""
    name = passage.title
    if not name:
        first = passage.text.split(". ", 1)[0]
        names = [s for s in analyse(first).slots if s.kind == "entity"] if first.strip() else []
        name = names[0].text if names else None
    personal = len(_PERSONAL.findall(passage.text)) > len(_IMPERSONAL.findall(passage.text))
    return name, frozenset({"he", "she"} if personal else {"it"})


def _names_topic(title: str, name: str) -> bool:
    """``name`` names the passage's topic or part of it ('Edmund' in 'Edmund Hillary')."""
    words = set(terms(name))
    return names_match(title, name) or bool(words) and words <= set(terms(title))


def _part_of(a: str, b: str) -> bool:
    """One name's words are all in the other's ('Wilbur' / 'Wilbur Wright')."""
    x, y = set(terms(a)), set(terms(b))
    return bool(x) and bool(y) and (x <= y or y <= x)


def _share_word(a: str, b: str) -> bool:
    """Names sharing a word ('Aldrin' / 'Buzz Aldrin')."""
    return bool(set(terms(a)) & set(terms(b)))


def _event_lines(claim: Analysis, lines: list[_Line]) -> list[_Line]:
    """The aligned sentences about the claim's event: those that state the most of the
    claim's slots and its main verb. A slot may be contradicted only from one of them, so a
    sentence that merely shares the subject (the 1903 Physics prize for a claim about the
    Chemistry prize) cannot supply a replacement."""
    if not lines:
        return []
    main = claim.relation
    verb = main.lemma if main is not None and main.lemma not in _LIGHT_VERBS else None

    def event_score(line: _Line) -> int:
        agreeing = sum(1 for c in claim.slots if _states_slot(c, line))
        # the verb weighs as two names: 'Utzon resigned from the project in 1966' is the event of
        # 'Jørn Utzon resigned from the Sydney Opera House project', not a sentence naming both
        return agreeing + 2 * int(verb is not None and any(r.lemma == verb for r in line.analysis.relations))

    scores = [event_score(line) for line in lines]
    best = max(scores)
    return [line for line, score in zip(lines, scores, strict=True) if score == best]


_WORD = re.compile(r"[\w'’-]+")


def _anchored_conflict(slot: Slot, claim: Analysis, lines: list[_Line]) -> _Found | None:
    """A name of the claim that an aligned sentence, read word by word, replaces by another
    name in the same words: everything else around it matches ('... for the Inca emperor
    Atahualpa around 1450' / '... for the Inca emperor Pachacuti around 1450'; 'designed
    by the Swedish architect Jørn Utzon' / 'designed by the Danish architect Jørn Utzon').
    The words say it is the same event and the same role where the parse of the two
    sentences differs (the small model attaches and labels a name from one sentence to the
    next differently). Every differing word lies inside the claim's name; the evidence's
    words in its place are a name (capitalised or numbered); at least three matching words
    around it, two of them content words, on both sides unless the name starts or ends the
    sentence. A name in the claim's subject needs a common noun right before it ('the
    container ship Ever Green'): the same words about another subject are another fact
    ('Neptune is the seventh planet' / 'Uranus is the seventh planet')."""
    if slot.kind != "entity":
        return None
    subject = slot.role.dep in _SUBJECT_DEPS or (
        claim.subject is not None and claim.subject[0] <= slot.start and slot.end <= claim.subject[1]
    )
    a = [(m.start(), m.end()) for m in _WORD.finditer(claim.text)]
    inside = [k for k, (st, en) in enumerate(a) if slot.start <= st and en <= slot.end]
    if not inside:
        return None
    si, sj = inside[0], inside[-1] + 1
    a_low = [claim.text[st:en].lower() for st, en in a]
    others = [c for c in claim.slots if c is not slot and c.kind == "entity"]
    for line in lines:
        ev = line.analysis.text
        b = [(m.start(), m.end()) for m in _WORD.finditer(ev)]
        b_low = [ev[st:en].lower() for st, en in b]
        ops = difflib.SequenceMatcher(None, a_low, b_low, autojunk=False).get_opcodes()
        changed = [k for k, op in enumerate(ops) if op[0] != "equal" and op[1] < sj and si < max(op[2], op[1] + 1)]
        if len(changed) != 1:
            continue
        k = changed[0]
        op, i1, i2, j1, j2 = ops[k]
        if op != "replace" or i1 < si or i2 > sj:
            continue
        left = ops[k - 1] if k > 0 else None
        right = ops[k + 1] if k + 1 < len(ops) else None
        if (left is None and i1 > si) or (right is None and i2 < sj):
            continue
        # the name's own matching words map one to one; the context is the rest of the equal runs
        ej1, ej2 = j1 - (i1 - si), j2 + (sj - i2)
        before = a_low[left[1] : si] if left is not None else []
        after = a_low[sj : right[2]] if right is not None else []
        if not (before or si == 0) or not (after or sj == len(a)):
            continue  # a differing word right before or after the name
        if subject and not (before and before[-1] not in STOP_WORDS):
            continue
        context = before + after
        if len(context) < 3 or sum(1 for w in context if w not in STOP_WORDS) < 2:
            continue
        start, end = b[ej1][0], b[ej2 - 1][1]
        stated = ev[start:end]
        if not all(NAME_WORD.fullmatch(ev[st:en]) for st, en in b[ej1:ej2]) or not stated[:1].isupper():
            continue
        theirs, ours = " ".join(b_low[j1:j2]), " ".join(a_low[i1:i2])
        if any(ch.isdigit() for ch in theirs) != any(ch.isdigit() for ch in ours):
            continue  # a word for a figure ('Summer' for '1976')
        if names_match(slot.text, stated) or any(names_match(c.text, stated) for c in others):
            continue
        if b_low[ej2 - 1] == a_low[sj - 1] and len(inside) > 1:
            continue  # one family's names ('Pierre Curie' / 'Marie Curie'): a pronoun resolved to the wrong one
        return Mismatch(
            kind="entity", span=(slot.start, slot.end), text=slot.text, replacement=stated,
            evidence_index=line.aligned.sentence.passage_index, evidence_span=line.offset(start, end),
        ), line  # fmt: skip
    return None


def _first_support(slot: Slot, lines: list[_Line], passages: list[str] | None) -> _Line | None:
    """The first aligned sentence that states the slot. The claim's subject is also
    supported by its passage naming it, or by a sentence whose subject refers back to it
    ('She took a teaching position ...')."""
    for line in lines:
        if any(slots_agree(slot, e) for e in line.analysis.slots):
            return line
        if slot.kind == "entity" and mentions(line.analysis.text, slot.text):
            return line
        if slot.kind != "entity" and states_value(line.analysis.text, slot.text):
            return line
    for line in lines:  # the rest of the aligned sentence's passage, as written
        passage = passages[line.aligned.sentence.passage_index] if passages else line.analysis.text
        if slot.kind == "entity":
            if (
                mentions(passage, slot.text)
                or slot.role.dep in _SUBJECT_DEPS
                and _anaphoric_subject(line.analysis)
            ):
                return line
        elif states_value(passage, slot.text):
            return line
    return None


def _normal(text: str) -> str:
    return " ".join(text.lower().replace(",", "").split())


def states_value(text: str, value: str) -> bool:
    """``value`` occurs in ``text`` as whole words ('45' is not in '1945', nor '24' in '1924')."""
    needle = _normal(value)
    return bool(needle) and re.search(rf"(?<![\w.]){re.escape(needle)}(?![\w]|\.\d)", _normal(text)) is not None


def _anaphoric_subject(analysis: Analysis) -> bool:
    """The sentence's subject is a pronoun or a definite description ('it', 'the film'), not
    a name ('The Rhine')."""
    if analysis.subject is None:
        return False
    start, end = analysis.subject
    words = analysis.text[start:end].lower().split()
    if any(s.kind == "entity" and start <= s.start and s.end <= end for s in analysis.slots):
        return bool(words) and words[0] in ANAPHORS and len(words) == 1
    return bool(words) and (words[0] in ANAPHORS or len(words) == 2 and words[0] in ("the", "this"))


def _same_objects(claim: Relation, evidence: Relation) -> bool:
    """Negation and antonyms contradict only about the same thing: 'is not a musician'
    does not conflict with 'is a football player'."""
    if not claim.objects:
        return True
    return bool(claim.objects & evidence.objects) or bool(
        {stem(o) for o in claim.objects} & {stem(o) for o in evidence.objects}
    )


def _missing_markers(claim: Analysis, lines: list[_Line]) -> list[str]:
    """Polarity and exclusivity words of the claim ('not', 'only', 'never', 'yet to') that no
    aligned sentence has: without them the evidence does not say what the claim says."""
    text = " " + " ".join(ln.analysis.text.lower() for ln in lines) + " "
    claim_text = " " + claim.text.lower() + " "
    missing = [m.strip() for m in _MARKERS if m in claim_text and m not in text]
    best = " " + lines[0].analysis.text.lower() + " "  # and the other way round, in the best sentence
    return missing + [m.strip() for m in _MARKERS if m in best and m not in claim_text]


def _titles(lines: list[_Line], evidence: list[Passage] | None) -> dict[int, str]:
    """The titles of the aligned sentences' passages, by passage index."""
    out = {}
    for line in lines:
        index = line.aligned.sentence.passage_index
        if evidence is not None and 0 <= index < len(evidence) and evidence[index].title:
            out[index] = str(evidence[index].title)
    return out


def _states_slot(slot: Slot, line: _Line) -> bool:
    """The aligned sentence itself states the claim's slot."""
    return any(slots_agree(slot, e) for e in line.analysis.slots) or writes(line.analysis.text, slot)


def writes(text: str, slot: Slot) -> bool:
    """``text`` writes the slot: its name mentioned, its value as whole words."""
    return mentions(text, slot.text) if slot.kind == "entity" else states_value(text, slot.text)


def _stated_of_another(slot: Slot, claim: Analysis, line: _Line) -> bool:
    """The sentence names the claim's name only in a clause about another subject, while
    the claim's own subject is the subject of another of its clauses: 'Isaac Newton studied
    and taught at Trinity College, and Charles Darwin studied at Christ's College' does not
    say that Darwin studied at Trinity College."""
    if slot.kind != "entity" or slot.role.dep in _SUBJECT_DEPS:
        return False
    ours = named_subject(claim)
    if ours is None:
        return False
    evidence = line.analysis
    named = _names_with(slot, line)
    holders = [clause_subject(evidence, e) for e in named]
    if not named or any(h is None or names_match(ours.text, h.text) for h in holders):
        return False
    return any(e.role.dep in _SUBJECT_DEPS and names_match(ours.text, e.text) for e in evidence.slots)


_ONCE = frozenset({"bear", "die"})
"""Events that happen once to their subject, at one place and one time."""
_PLACE_PREPOSITIONS = frozenset({"in", "at"})


def _gives_verb_another(slot: Slot, verb: str, analysis: Analysis, claim: Analysis) -> bool:
    """The sentence gives ``verb`` a name in ``slot``'s role that is not ``slot``'s, said of the
    claim's subject ('born in Maida Vale' against 'born in Wilmslow'; 'in' and 'at' both say
    where; 'His son was born in London' is not the claim's subject's birthplace)."""
    prep = slot.role.prep
    preps = _PLACE_PREPOSITIONS if prep in _PLACE_PREPOSITIONS else {prep}
    return any(
        e.kind == "entity" and e.role.verb == verb and e.role.head == verb and e.role.prep in preps
        and not names_match(slot.text, e.text)  # whatever the NER labels them ('Málaga' as a person)
        and _said_of_subject(claim, analysis, e)
        for e in analysis.slots
    )  # fmt: skip


def _said_of_subject(claim: Analysis, evidence: Analysis, slot: Slot) -> bool:
    """The evidence's ``slot`` is said of the claim's subject: its clause has none (a
    participle: '..., born in Maida Vale'), a personal pronoun, or the claim's subject's name;
    not another name nor a noun ('His son was born in London')."""
    subject = clause_subject_token(evidence, slot)
    if subject is not None and subject.tag_ in ("WDT", "WP") and subject.head.dep_ == "relcl":
        subject = _antecedent(subject.head.head)  # 'a major river that flows': the river
    if subject is None or subject.tag_ == "PRP":
        return True
    ours = named_subject(claim)
    words = evidence.doc[subject.left_edge.i : subject.right_edge.i + 1].text  # a name the NER missed too
    return ours is not None and names_match(ours.text, words)


def _antecedent(noun: Token) -> Token:
    """What a relative clause's noun stands for: the subject of the copula it completes ('The
    Nile is a major river that ...': Nile) or the name it is in apposition to ('Marie Curie,
    a physicist who ...': Curie); else the noun itself ('His son, who ...')."""
    if noun.dep_ == "attr":
        return next((c for c in noun.head.children if c.dep_ in _SUBJECT_DEPS), noun)
    return noun.head if noun.dep_ == "appos" else noun


def _of_subject(claim: Analysis, evidence: Analysis, slot: Slot) -> bool:
    """The evidence's ``slot`` is said of the claim's subject: its clause has no named subject
    ('He was born in Ulm'), or the claim's ('Einstein was born in Ulm'), or the claim names
    none."""
    ours = named_subject(claim)
    theirs = clause_subject(evidence, slot)
    return ours is None or theirs is None or names_match(ours.text, theirs.text)


def _same_document(a: int, b: int, evidence: list[Passage] | None) -> bool:
    """Two passages of one document (the windows of one indexed file overlap)."""
    if a == b:
        return True
    if evidence is None or not (0 <= a < len(evidence) and 0 <= b < len(evidence)):
        return False
    return bool(evidence[a].source) and evidence[a].source == evidence[b].source


def _names_with(slot: Slot, line: _Line, verb: str | None = None) -> list[Slot]:
    """The sentence's names that name the claim's name (with ``verb``: as a value of that verb)."""
    return [
        e for e in line.analysis.slots
        if e.kind == "entity" and names_match(slot.text, e.text) and (verb is None or e.role.verb == verb)
    ]  # fmt: skip


def _same_subject(claim: Analysis, line: _Line, support: dict[Slot, _Line]) -> bool:
    """The evidence sentence is about what the claim is about: it supports another slot of
    the claim, or contains the claim's subject words, or most of the claim's words."""
    if any(v is line for v in support.values()):
        return True
    if claim.subject is not None:
        subject_terms = terms(claim.text[claim.subject[0] : claim.subject[1]])
        if subject_terms and term_recall(subject_terms, line.analysis.terms) >= 0.5:
            return True
    return line.aligned.lexical >= 0.5


def _topic_subject(claim: Analysis, line: _Line, evidence: list[Passage] | None) -> bool:
    """The evidence sentence's subject is a pronoun standing for its passage's topic
    (``_topic``), and that topic is the claim's subject."""
    index = line.aligned.sentence.passage_index
    if claim.subject is None or evidence is None or not 0 <= index < len(evidence):
        return False
    # the sentence's own pronoun subject first: reading the passage's topic scans the whole passage
    subjects = {t.lower_ for t in line.analysis.doc if t.tag_ == "PRP" and t.dep_ in _SUBJECT_DEPS}
    if not subjects:
        return False
    subject_terms = terms(claim.text[claim.subject[0] : claim.subject[1]])
    topic, pronouns = _topic(evidence[index])
    if not subject_terms or topic is None or term_recall(subject_terms, terms(topic)) < 0.5:
        return False
    return bool(subjects & pronouns)


def _same_clause(slot: Slot, candidate: Slot, claim: Analysis, line: _Line) -> bool:
    """Where the evidence sentence lacks the verb of the claim's value but has another verb
    of the claim, only a value of a verb the claim has answers it: 'opened ... on 20 October
    1973, after being designed by ... Utzon' against 'It was designed by ... Utzon, whose
    entry won a competition in 1957' shares the clause of 'design', and 1957 is the date of
    'win', another event, not the opening's ('His 1936 paper ... introduced' still answers
    'paper ..., published in 1946, introduced'). Otherwise (the same verb, or a paraphrase:
    'completed' / 'finished') the roles decide as before; names always need the same verb
    (``_best_candidate``)."""
    mine = slot.role.verb
    if slot.kind == "entity" or mine is None or mine in _LIGHT_VERBS:
        return True
    theirs = {r.lemma for r in line.analysis.relations} - _LIGHT_VERBS
    if mine in theirs:  # the roles decide ('born in 1820 and died in 1900')
        return True
    ours = {r.lemma for r in claim.relations}
    if theirs & ours:
        return candidate.role.verb in ours or candidate.role.head == slot.role.head
    return True


def _best_candidate(slot: Slot, candidates: list[Slot]) -> Slot | None:
    """The evidence slot that plays the claim slot's role; ambiguity means no answer."""
    if not candidates:
        return None
    ranked = sorted(candidates, key=lambda e: role_similarity(slot, e), reverse=True)
    best = role_similarity(slot, ranked[0])
    if len(ranked) > 1 and role_similarity(slot, ranked[1]) >= best:
        return None
    if slot.kind == "entity":  # names are many per sentence: only the same role of the same verb
        choice = ranked[0]
        same_verb = slot.role.verb is not None and choice.role.verb == slot.role.verb
        same_role = (same_verb or choice.role.head == slot.role.head) and (
            choice.role.prep == slot.role.prep or choice.role.same_part(slot.role)
        )
        return choice if same_role and best >= 2.5 else None
    return ranked[0] if best >= (0.0 if len(ranked) == 1 else 1.0) else None


def _negated_span(analysis: Analysis, relation: Relation) -> tuple[int, int]:
    """The verb together with its negator ('never visited', 'did not win')."""
    doc = analysis.doc
    verb = next(t for t in doc if t.idx == relation.start)
    tokens = [verb, *(c for c in verb.children if c.dep_ == "neg" or c.lower_ in ("never", "not", "n't"))]
    tokens += [
        c for c in verb.children if c.dep_ == "aux" and c.i < verb.i and any(n.i > c.i for n in tokens[1:])
    ]
    start = min(t.idx for t in tokens)
    end = max(t.idx + len(t) for t in tokens)
    return start, end


def _coverage(claim: Analysis, lines: list[_Line], support: dict[Slot, _Line]) -> float:
    """Share of the claim's content terms present in the aligned sentences (terms inside a
    supported slot count as present: 'Penélope Cruz' is supported by 'Cruz')."""
    present = {t for line in lines for t in line.analysis.terms}
    for slot in support:
        present.update(terms(slot.text))
    return term_recall(claim.terms, tuple(present)) if claim.terms else 0.0


def _relation_supported(claim: Analysis, lines: list[_Line], support: dict[Slot, _Line]) -> bool:
    """The main verb (unless light: be, have, ...) and its objects and complements ('is a
    county' needs 'county') occur in the aligned sentences."""
    main = claim.relation
    if main is None:
        return True
    present = {t for line in lines for t in line.analysis.terms}
    for slot in support:
        present.update(terms(slot.text))
    for line in lines:
        present.update(r.lemma for r in line.analysis.relations)
    if main.lemma not in _LIGHT_VERBS and not (
        {main.lemma, stem(main.lemma), stem(main.text.lower())} & present
    ):
        return False
    # an object that is no term ('May' of 'on 25 May 1935' is a stop word) cannot be looked for
    objects = [o for o in main.objects if o.isalpha() and o not in _STOP_OBJECTS and terms(o)]
    return all(o in present or stem(o) in present for o in objects)


def _claim_span(claim: str) -> tuple[int, int]:
    stripped = claim.rstrip()
    start = len(stripped) - len(stripped.lstrip())
    return start, len(stripped)
