"""The edit gate: correct mode rewrites a sentence only when the edit is grounded and
re-verified. A wrong correction is worse than none, so every doubt leaves the sentence as
written (flagged, with the reason).

An editor's revision is applied only if

1. every change names one and the same evidence sentence (its slots all come from it);
2. that sentence (with the sentence before it in its passage when it opens with a pronoun)
   contradicts the original sentence: the pipeline's verifier on that sentence alone finds
   a contradiction, or every change puts the sentence's own number, date or name in place
   of one of the same type that disagrees with it;
3. it entails the edited sentence: the verifier finds no contradiction there, and the NLI
   model's P(entailment) reaches ``min_entailment`` (the model's calibrated high-precision
   threshold; without an NLI model the verifier must find the edit attributable, or find
   every number, date and name of the edited sentence in that evidence sentence);
4. the edited sentence does not contradict what the answer already said (NLI from the
   earlier text, P(contradiction) below ``max_context_contradiction`` or no higher than
   for the original).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from middleware.pipeline.sentences import split_sentences
from middleware.pipeline.slots import analyse, slots_agree
from middleware.pipeline.verifiers.base import DetailedVerdict, Verifier
from middleware.pipeline.verifiers.nli import NLIVerifier
from middleware.revise.base import EditResult
from middleware.types import NLI_LABELS, Passage, Revision, Verdict

_ENTAIL = NLI_LABELS.index("attributable")
_CONTRADICT = NLI_LABELS.index("contradictory")
_OPENS_WITH_PRONOUN = re.compile(r"^\W*(it|its|he|his|she|her|they|their|this|these|those|there)\b", re.IGNORECASE)


@dataclass(frozen=True)
class GatePolicy:
    min_entailment: float = 0.5
    max_context_contradiction: float = 0.5


class EditGate:
    """Decides whether an editor's revision may replace the sentence (see the module doc)."""

    def __init__(self, verifier: Verifier, nli: NLIVerifier | None, policy: GatePolicy | None = None) -> None:
        self.verifier = verifier
        self.nli = nli
        self.policy = policy or GatePolicy()

    async def review(
        self, result: EditResult, evidence: list[Passage], context: str | None = None
    ) -> Revision:
        if not result.changed:
            return Revision(status="flagged", reason=result.rejected or "no edit was found")
        sentences = {e.evidence for e in result.edits}
        if None in sentences or len(sentences) != 1:
            return self._flag(result, "the edits do not come from one evidence sentence")
        grounding = next(iter(sentences))
        assert grounding is not None
        passage = _passage_of(result, evidence)
        premise = evidence_premise(grounding, passage.text if passage is not None else None)
        single = [Passage(id=passage.id if passage else "evidence", text=premise, provider="gate", source="gate")]
        before = await self.verifier.verify(result.original, single, context)
        after = await self.verifier.verify(result.text, single, context)
        scores: dict[str, float] = {}
        if self.nli is not None:
            probs = await self.nli.probabilities([(premise, result.original), (premise, result.text)])
            scores["evidence_contradicts_original"] = round(float(probs[0, _CONTRADICT]), 4)
            scores["evidence_entails_edited"] = round(float(probs[1, _ENTAIL]), 4)
        flag = _Flagger(self, result, grounding, scores)
        if before.label != "contradictory" and not _replaces_disagreeing_slots(result):
            return flag("the evidence sentence does not contradict the original sentence")
        if after.label == "contradictory":
            return flag("the evidence sentence also contradicts the edited sentence")
        if self.nli is None and not _slots_all_stated(after):
            return flag("the evidence sentence does not state every slot of the edited sentence")
        if self.nli is not None and scores["evidence_entails_edited"] < self.policy.min_entailment:
            return flag(
                f"the evidence sentence does not entail the edited sentence "
                f"(P={scores['evidence_entails_edited']:.2f} < {self.policy.min_entailment:.2f})"
            )
        if context and self.nli is not None:
            probs = await self.nli.probabilities([(context, result.original), (context, result.text)])
            scores["context_contradicts_edited"] = round(float(probs[1, _CONTRADICT]), 4)
            worse = probs[1, _CONTRADICT] > probs[0, _CONTRADICT]
            if worse and probs[1, _CONTRADICT] >= self.policy.max_context_contradiction:
                return flag("the edited sentence contradicts what the answer already said")
        return Revision(
            status="applied",
            reason="the evidence sentence contradicts the original and supports the edit",
            suggested=result.text,
            evidence_id=result.evidence_id,
            evidence_sentence=grounding,
            scores=scores,
        )

    def _flag(self, result: EditResult, reason: str) -> Revision:
        return Revision(status="flagged", reason=reason, suggested=result.text, evidence_id=result.evidence_id)


@dataclass
class _Flagger:
    gate: EditGate
    result: EditResult
    grounding: str
    scores: dict[str, float]

    def __call__(self, reason: str) -> Revision:
        return Revision(
            status="flagged",
            reason=reason,
            suggested=self.result.text,
            evidence_id=self.result.evidence_id,
            evidence_sentence=self.grounding,
            scores=self.scores,
        )


def _replaces_disagreeing_slots(result: EditResult) -> bool:
    """Every change swaps a slot for a comparable one of the evidence that disagrees with it
    ('1915' -> '1911', 'Atlantis' -> 'Discovery')."""
    for edit in result.edits:
        old, new = analyse(edit.original).slots, analyse(edit.replacement).slots
        if len(old) != 1 or len(new) != 1 or slots_agree(old[0], new[0]) is not False:
            return False
    return bool(result.edits)


def _slots_all_stated(verdict: Verdict) -> bool:
    if verdict.label == "attributable":
        return True
    return isinstance(verdict, DetailedVerdict) and not verdict.unsupported and not verdict.mismatches


def _passage_of(result: EditResult, evidence: list[Passage]) -> Passage | None:
    if result.evidence_index is not None and 0 <= result.evidence_index < len(evidence):
        return evidence[result.evidence_index]
    return next((p for p in evidence if p.id == result.evidence_id), None)


def evidence_premise(sentence: str, passage: str | None) -> str:
    """The evidence sentence, standing alone: one that opens with a pronoun ('She received
    the 1911 Nobel Prize ...') gets the sentence before it in its passage."""
    if passage is None or not _OPENS_WITH_PRONOUN.match(sentence):
        return sentence
    at = passage.find(sentence)
    if at <= 0:
        return sentence
    previous = [passage[s:e] for s, e in split_sentences(passage[:at]) if passage[s:e].strip()]
    return f"{previous[-1].strip()} {sentence}" if previous else sentence
