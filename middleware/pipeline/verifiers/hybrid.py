"""NLI and slots together, each where it is stronger. NLI sees paraphrase ('won' ~
'received'); slot comparison sees numbers, dates, names and negation that small NLI models
gloss over.

- a number, date, quantity or name mismatch, a participant in the wrong role, or an
  opposite verb about the same objects, in an aligned sentence -> contradictory, whatever
  NLI says (small NLI models read bags of words: they entail role swaps, 'knighted by Queen
  Victoria' from 'knighted by Queen Anne' at P=0.91, and 'In 1957 Elvis Presley sold
  Graceland' from 'In 1957 he bought Graceland' at P=0.89); a name mismatch is one only in
  the same role of the same verb in the sentence about the claim's event
  (``SlotsVerifier``)
- a yes/no field of structured evidence that the claim states the opposite of
  (``fields.py``: "Outdoor Seating: no" against "it offers outdoor seating") -> contradictory,
  with the learned decision too; yes/no fields it states as the record does, where they are
  all it says (``field_support.py``) -> attributable instead of extrapolatory
- NLI contradiction -> contradictory when slots localise it (with the slot span); an
  unlocalised one must be confident (p >= ``nli_only_contradiction``), and never overrides
  slots that found every claim slot in the evidence (the small bundled model contradicted
  "She was born in Warsaw in 1867." against "born ... in Warsaw on 7 November 1867")
- NLI entailment -> attributable, unless (and the entailment is not strong) a number, date or
  name of the claim appears nowhere in the aligned evidence, or a negation or exclusivity word
  ('not', 'only', 'never') stands on one side only
- NLI neutral but every slot supported and the words covered -> attributable
- otherwise extrapolatory

These hand cut-offs decide only where the NLI model's manifest carries no learned decision.
With one (``decision.combiner``, ``factcheck fit-combiner``), a calibrated combiner reads every
signal above as a named feature (``features.py``) and decides: contradictory where
P(contradictory) reaches its high-precision threshold, or where the slots rules locate a
contradiction and P(attributable) stays below its threshold (the combiner vetoes the rules
where it finds the claim supported); attributable where P(attributable) reaches its
balanced-accuracy optimum (against evidence that holds structured records, the cut-off
fitted end to end on such checks: ``support_threshold``); else extrapolatory. The slots
verifier's findings still say where and what (span, mismatches, the evidence's replacement)
for tagging and editing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from middleware.pipeline.alignment import Aligned, sentences_of_passages
from middleware.text.evidence_sentences import split_sentences
from middleware.pipeline.slots import analyse, analyse_async
from middleware.pipeline.verifiers import features as F
from middleware.pipeline.verifiers.base import DetailedVerdict, first_given, ordered
from middleware.pipeline.verifiers.combiner import Combiner
from middleware.pipeline.verifiers.field_support import supporting_fields
from middleware.pipeline.verifiers.fields import Field, holds_record
from middleware.pipeline.verifiers.nli import NLIAssessment, NLIVerifier, estimate_tokens
from middleware.pipeline.verifiers.slots_verifier import SlotsVerifier
from middleware.types import NLI_LABELS, Passage, RuleFinding

_DECISIVE = ("number", "quantity", "date", "role", "entity", "relation")


@dataclass
class Reading:
    """Everything the hybrid gathered about one claim against its evidence."""

    claim: str
    evidence: list[Passage]
    assessment: NLIAssessment
    aligned: list[Aligned]
    nli: DetailedVerdict
    slots: DetailedVerdict
    focus: np.ndarray | None  # NLI probabilities of the best-aligned sentences as one premise
    features: dict[str, float]


class HybridVerifier:
    name = "hybrid"

    def __init__(
        self,
        nli: NLIVerifier,
        slots: SlotsVerifier,
        *,
        strong_entailment: float | None = None,
        nli_only_contradiction: float | None = None,
        combiner: Combiner | None = None,
        learned: bool = True,
    ) -> None:
        self.nli = nli
        self.slots = slots
        # given, else tuned with this NLI model on dev data (its manifest), else 0.9
        decision = getattr(nli, "decision", None)
        self.strong_entailment = first_given(strong_entailment, getattr(decision, "hybrid_strong_entailment", None), 0.9)
        self.nli_only_contradiction = first_given(
            nli_only_contradiction, getattr(decision, "hybrid_nli_only_contradiction", None), 0.9
        )
        # the learned decision: given, else the NLI model's (its manifest), unless the hand cut-offs are asked for
        weights = getattr(decision, "combiner", None)
        self.combiner: Combiner | None = (combiner or (Combiner(weights) if weights else None)) if learned else None
        self.record_threshold: float | None = None
        """P(attributable) at which a claim checked against structured records is attributable
        (``pipeline.rules.record_threshold``); None: the combiner's fitted one."""

    async def verify(
        self, claim: str, evidence: list[Passage], context: str | None = None
    ) -> DetailedVerdict:
        return self.decide(await self.read(claim, evidence))

    async def read(self, claim: str, evidence: list[Passage]) -> Reading:
        """Score the evidence windows, align and judge the slots, score the best-aligned
        sentences as one premise, and name every signal as a feature. Citation markers are
        blanked out first (``mask_citations``: offsets into the claim stay valid)."""
        claim = F.mask_citations(claim)
        assessment, aligned = await asyncio.gather(
            self.nli.assess(claim, evidence),
            self.slots.aligner.align(claim, sentences_of_passages(evidence), self.slots.top_k),
        )
        # the sentences the slots verifier reads, parsed off the event loop (judge then hits the cache)
        await analyse_async([a.sentence.text for a in aligned if a.score >= self.slots.min_align])
        slots = self.slots.judge(claim, aligned, evidence)
        focus = await self._focus(claim, aligned)
        features = (
            F.nli_features(assessment.probs, assessment.lexical, self.nli.min_align)
            | F.focus_features(focus)
            | F.sentence_features(await self._per_sentence(claim, evidence, assessment))
            | F.lexical_features(claim, [p.text for p in evidence])
            | {"lexical_best": float(assessment.lexical.max()) if len(assessment.lexical) else 0.0}
            | F.slot_features(slots, len(analyse(claim).slots), max((a.score for a in aligned), default=0.0))
            | F.length_features(claim, len(assessment.windows))
            | {f"rule:{r.name}": 1.0 for r in slots.rules}
        )
        return Reading(claim, evidence, assessment, aligned, self.nli.decide(assessment), slots, focus, features)

    async def _per_sentence(self, claim: str, evidence: list[Passage], whole: NLIAssessment) -> list[np.ndarray]:
        """Each sentence's window probabilities; a one-sentence claim (every claim the
        proxy checks: it cuts answers into sentences) is its own, at no extra cost."""
        spans = split_sentences(claim)
        if len(spans) <= 1:
            return [whole.probs]
        assessments = await asyncio.gather(*(self.nli.assess(claim[s:e], evidence) for s, e in spans))
        return [a.probs for a in assessments]

    async def _focus(self, claim: str, aligned: list[Aligned]) -> np.ndarray | None:
        """The aligned sentences the slots verifier reads, in passage order, as one premise:
        a sentence copied from a long document is entailed on its own where a window packed
        with its neighbours blurs it."""
        chosen = [a.sentence for a in aligned if a.score >= self.slots.min_align]
        if not chosen:
            return None
        budget = max(16, self.nli.max_length - estimate_tokens(claim) - 4)
        kept, used = [], 0
        for sentence in chosen:  # best first, within the model's length
            cost = estimate_tokens(sentence.text)
            if kept and used + cost > budget:
                break
            kept.append(sentence)
            used += cost
        kept.sort(key=lambda s: (s.passage_index, s.start))
        premise = " ".join(s.text.strip() for s in kept)
        return (await self.nli.probabilities([(premise, claim)]))[0]

    def decide(self, reading: Reading) -> DetailedVerdict:
        """The learned decision where the model has one, else the hand cut-offs; either way
        the verdict lists the rules that fired."""
        if self.combiner is not None:
            verdict = self._learned(reading, self.combiner)
        else:
            verdict = self.combine(reading.claim, reading.nli, reading.slots)
        rules = list(reading.slots.rules)
        if verdict.label == "extrapolatory" and self.slots.enabled("field_support"):
            if supported := supporting_fields(reading.claim, reading.evidence):
                verdict = _field_supported(verdict, supported, reading.evidence)
                rules.append(RuleFinding(name="field_support", detail=verdict.evidence_sentence))
        return verdict.model_copy(update={"rules": rules})

    def _learned(self, reading: Reading, combiner: Combiner) -> DetailedVerdict:
        p_attr = combiner.p_attributable(reading.features)
        p_contra = combiner.p_contradictory(reading.features)
        scores = ordered(
            {"attributable": p_attr, "contradictory": (1 - p_attr) * p_contra, "extrapolatory": (1 - p_attr) * (1 - p_contra)}
        )
        slots, nli = reading.slots, reading.nli
        detail = f"P(attributable)={p_attr:.2f}, P(contradictory)={p_contra:.2f}"
        # a contradiction the slots rules locate (a value, a role, a verb) stands where the
        # combiner does not find the claim supported: on third-party text these rules also fire
        # on sentences people judged supported, and the combiner's support vetoes them there
        located = slots.label == "contradictory" and any(m.kind in _DECISIVE for m in slots.mismatches)
        if (p_contra >= combiner.contradictory_threshold or (located and p_attr < combiner.attributable_threshold)
                or _standing(slots)):
            lead = slots if slots.label == "contradictory" else self.nli.contradiction_verdict(reading.assessment)
            label, reason = "contradictory", f"{lead.reason or 'the evidence contradicts the claim'} ({detail})"
        elif p_attr >= (support := self.support_threshold(reading.evidence, combiner)):
            lead = nli if nli.label == "attributable" or slots.label != "attributable" else slots
            record = "" if support == combiner.attributable_threshold else f", a record's cut-off {support:.2f}"
            label, reason = "attributable", f"the evidence supports the claim ({detail}{record})"
        else:
            lead = slots if slots.label == "extrapolatory" else nli
            label, reason = "extrapolatory", f"{slots.reason or nli.reason or 'not stated by the evidence'} ({detail})"
        verdict = lead.model_copy(update={"label": label, "scores": scores, "reason": reason, "backend": self.name})
        if label != "attributable":
            verdict.unsupported = slots.unsupported
            if label == "extrapolatory":
                verdict.span = slots.span
            if slots.mismatches and label == "contradictory":
                verdict.span, verdict.mismatches = slots.mismatches[0].span, slots.mismatches
        return verdict

    def support_threshold(self, evidence: list[Passage], combiner: Combiner) -> float:
        """Where P(attributable) says attributable: the combiner's cut-off, chosen on the
        battery's prose pairs; against evidence that holds structured records, the one fitted
        end to end on such checks (``pipeline.rules.record_threshold``, else the manifest's).
        The NLI model reads a record's fields poorly ("Outdoor Seating: no" as support for
        outdoor seating), and an overview of a business draws on its fields and on several
        reviews at once, which no window entails: against records the combiner's cut-off
        flagged 46 % of the sentences people judged supported (RAGTruth data-to-text,
        docs/verdicts.md). A located contradiction's veto keeps the combiner's own cut-off."""
        if holds_record(evidence):
            return first_given(self.record_threshold, combiner.record_threshold)
        return combiner.attributable_threshold

    def combine(self, claim: str, nli: DetailedVerdict, slots: DetailedVerdict) -> DetailedVerdict:
        p_entail = nli.scores.get("attributable", 0.0)
        strong = p_entail >= self.strong_entailment
        if slots.label == "contradictory":
            decisive = any(m.kind in _DECISIVE for m in slots.mismatches) or _standing(slots)
            if decisive or not strong:
                return self._merge(slots, nli, "contradictory", slots.reason)
        unlocalised = nli.label == "contradictory" and not slots.mismatches
        if unlocalised and (slots.label == "attributable" or nli.scores.get("contradictory", 0.0) < self.nli_only_contradiction):
            if slots.label == "attributable":
                return self._merge(slots, nli, "attributable", "every slot of the claim is in the evidence")
            verdict = self._merge(nli, slots, "extrapolatory", f"unlocalised contradiction, not confident: {nli.reason}")
            verdict.span, verdict.unsupported = slots.span, slots.unsupported
            return verdict
        if nli.label == "contradictory":
            merged = self._merge(nli, slots, "contradictory", nli.reason)
            if slots.mismatches:
                merged.span, merged.mismatches = slots.mismatches[0].span, slots.mismatches
            return merged
        if nli.label == "attributable":
            missing = _unsupported_slots(claim, slots)
            if missing and not strong:
                reason = f"the evidence never states {', '.join(missing)}"
                verdict = self._merge(nli, slots, "extrapolatory", reason)
                verdict.span = slots.span
                return verdict
            if "polarity" in slots.gaps and not strong:
                return self._merge(nli, slots, "extrapolatory", slots.reason)
            return self._merge(nli, slots, "attributable", nli.reason)
        if slots.label == "attributable":
            return self._merge(slots, nli, "attributable", "every slot of the claim is in the evidence")
        verdict = self._merge(nli, slots, "extrapolatory", nli.reason)
        verdict.span, verdict.unsupported = slots.span, slots.unsupported
        return verdict

    def _merge(
        self, lead: DetailedVerdict, other: DetailedVerdict, label: str, reason: str | None
    ) -> DetailedVerdict:
        """The leading verdict's evidence and details, scores averaged with the other's and
        then the decided label lifted to the top if averaging left it below another."""
        scores = ordered({k: (lead.scores.get(k, 0.0) + other.scores.get(k, 0.0)) / 2 for k in NLI_LABELS})
        top = max(scores.values())
        if scores[label] < top:
            scores[label] = top + 1e-3
            scores = ordered(scores)
        return lead.model_copy(
            update={"label": label, "scores": scores, "reason": reason, "backend": self.name}
        )


STANDING_RULES = ("field_polarity", "field_value", "field_hours", "role_exchange")
"""Slots rules whose contradiction stands whatever the NLI model says: a yes/no field of
structured evidence the claim states the opposite of (the model reads "Outdoor Seating: no" as
support for "it has outdoor seating"; ``fields.py``), a number no numeric field of the data
holds ("business stars: 4.0" against "a rating of 4.5 stars": the model reads figures loosely),
opening hours the data's schedule states otherwise (``hours.py``: the model reads a week's hours
as a bag of times), and two people the claim names in each
other's roles (the model reads the swapped Apollo crew as support: the same names, the same
verbs)."""


def _field_supported(verdict: DetailedVerdict, fields: list[Field], evidence: list[Passage]) -> DetailedVerdict:
    """An extrapolatory verdict turned attributable by the record's yes/no fields the claim
    states as the record does (``field_support.py``): the NLI model, which reads "Outdoor
    Seating: no" as support for "it offers outdoor seating", is no judge of them either way."""
    first = fields[0]
    stated = "; ".join(evidence[f.passage_index].text[f.start : f.end] for f in fields)
    scores = dict(verdict.scores)
    scores["attributable"] = max(scores.values(), default=0.0) + 1e-3
    return verdict.model_copy(update={
        "label": "attributable", "scores": ordered(scores), "reason": f"the data states {stated}, as the claim does",
        "evidence_id": evidence[first.passage_index].id, "evidence_index": first.passage_index,
        "evidence_span": (first.start, first.end), "evidence_sentence": stated, "span": None, "unsupported": [],
        "mismatches": [],
    })  # fmt: skip


def _standing(slots: DetailedVerdict) -> bool:
    """A contradiction found by one of ``STANDING_RULES``."""
    return slots.label == "contradictory" and any(m.rule in STANDING_RULES for m in slots.mismatches)


def _unsupported_slots(claim: str, slots: DetailedVerdict) -> list[str]:
    """Numbers, dates, quantities and names of the claim that no aligned evidence states."""
    spans = set(slots.unsupported)
    return [s.text for s in analyse(claim).slots if (s.start, s.end) in spans]
