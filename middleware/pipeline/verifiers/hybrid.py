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
- NLI contradiction -> contradictory when slots localise it (with the slot span); an
  unlocalised one must be confident (p >= ``nli_only_contradiction``), and never overrides
  slots that found every claim slot in the evidence (the small bundled model contradicted
  "She was born in Warsaw in 1867." against "born ... in Warsaw on 7 November 1867")
- NLI entailment -> attributable, unless (and the entailment is not strong) a number, date or
  name of the claim appears nowhere in the aligned evidence, or a negation or exclusivity word
  ('not', 'only', 'never') stands on one side only
- NLI neutral but every slot supported and the words covered -> attributable
- otherwise extrapolatory
"""

from __future__ import annotations

import asyncio

from middleware.pipeline.alignment import split_passages
from middleware.pipeline.slots import analyse
from middleware.pipeline.verifiers.base import DetailedVerdict, first_given, ordered
from middleware.pipeline.verifiers.nli import NLIVerifier
from middleware.pipeline.verifiers.slots_verifier import SlotsVerifier
from middleware.types import NLI_LABELS, Passage

_DECISIVE = ("number", "quantity", "date", "role", "entity", "relation")


class HybridVerifier:
    name = "hybrid"

    def __init__(
        self,
        nli: NLIVerifier,
        slots: SlotsVerifier,
        *,
        strong_entailment: float | None = None,
        nli_only_contradiction: float | None = None,
    ) -> None:
        self.nli = nli
        self.slots = slots
        # given, else tuned with this NLI model on dev data (its manifest), else 0.9
        decision = getattr(nli, "decision", None)
        self.strong_entailment = first_given(strong_entailment, getattr(decision, "hybrid_strong_entailment", None), 0.9)
        self.nli_only_contradiction = first_given(
            nli_only_contradiction, getattr(decision, "hybrid_nli_only_contradiction", None), 0.9
        )

    async def verify(
        self, claim: str, evidence: list[Passage], context: str | None = None
    ) -> DetailedVerdict:
        assessment, aligned = await asyncio.gather(
            self.nli.assess(claim, evidence),
            self.slots.aligner.align(claim, split_passages(evidence), self.slots.top_k),
        )
        return self.combine(claim, self.nli.decide(assessment), self.slots.judge(claim, aligned, evidence))

    def combine(self, claim: str, nli: DetailedVerdict, slots: DetailedVerdict) -> DetailedVerdict:
        p_entail = nli.scores.get("attributable", 0.0)
        strong = p_entail >= self.strong_entailment
        if slots.label == "contradictory":
            decisive = any(m.kind in _DECISIVE for m in slots.mismatches)
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


def _unsupported_slots(claim: str, slots: DetailedVerdict) -> list[str]:
    """Numbers, dates, quantities and names of the claim that no aligned evidence states."""
    spans = set(slots.unsupported)
    return [s.text for s in analyse(claim).slots if (s.start, s.end) in spans]
