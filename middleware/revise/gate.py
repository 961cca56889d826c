"""The edit gate: correct mode rewrites a sentence only when the edit is grounded and
re-verified. A wrong correction is worse than none, so every doubt leaves the sentence as
written (flagged, with the reason).

An editor's revision is applied only if

1. every change names one and the same evidence sentence (its slots all come from it:
   ``one_evidence_sentence``), which states enough of the claim's other words to be about
   it (``about_the_claim``), whose titled passage names the sentence's subject
   (``subject_named``), no
   name it replaces is one the evidence passage states for something else (then the claim
   may have the wrong verb: 'born in Oxford' where he was born in Harrow and died in
   Oxford: ``name_stated_elsewhere``), and each change is a well-formed value swap (the
   change rules, ``gate_rules.CHANGE_RULES``): a number, date
   or name for one of its kind (other wording only with ``GatePolicy.wording``), no name
   dropped for a pronoun, no name the sentence already has elsewhere, no name the evidence
   sentence also names (that is a swapped role, not a wrong name), the resulting name as
   the evidence writes it, no 'one' before a plural noun, and the value of the claim's role
   (``value_of_the_role``: a shared name right by it, else the verbs);
2. that sentence (decontextualised: a leading pronoun becomes its passage's title,
   ``evidence_premise``; read under that title, ``_titled``) contradicts the original
   sentence: the pipeline's verifier on that sentence alone finds a contradiction, or every
   change puts the sentence's own number, date or name in place of one of the same type
   that disagrees with it;
3. it entails the edited sentence: the verifier finds no contradiction there, and the NLI
   model's P(entailment), reading the sentence alone, with the one it continues, under
   its passage title, or with the sentences of its passage that state the rest of the
   edited sentence (``_with_support``: the other clause of a two-clause sentence; the best
   of these), reaches ``min_entailment`` (the model's
   calibrated high-precision threshold; without an NLI model the verifier must find the
   edit attributable, or find every number, date and name of the edited sentence in that
   evidence sentence). A clean swap (every change puts the evidence sentence's value in
   place of a disagreeing one of its type, given to the same word or verb there) whose
   result the slots verifier (``slots``) finds wholly stated by that sentence under its
   passage's title (every slot, the verb, the words) needs only ``grounded_entailment``
   (the model's calibrated decision threshold): the small NLI model is unsure of sentences
   that the evidence restates word for word ('She died in London on 27 November 1852, aged
   36.' for 'Ada Lovelace died in London on 27 November 1852, aged 36.', P=0.78);
4. the edited sentence does not contradict what the answer already said (NLI from the
   earlier text, P(contradiction) below ``max_context_contradiction`` or no higher than
   for the original).

Each of these refusals is a named rule, registered in ``gate_rules.GATE_RULES`` in the order
they are applied (the form and proposal rules of 1 first, in ``gate_rules``; the
re-verification rules of 2-4 here, ``RECHECK_RULES``).
``disabled`` switches rules off by name (``pipeline.rules.gate_disabled``); a refused
revision records its rule in ``Revision.rule``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from middleware.evidence.lexical import terms
from middleware.text.evidence_sentences import split_sentences
from middleware.pipeline.slots import Slot, analyse, slots_agree
from middleware.pipeline.verifiers.base import DetailedVerdict, Verifier
from middleware.pipeline.verifiers.nli import NLIVerifier
from middleware.pipeline.verifiers.slots_verifier import SlotsVerifier, states_value, writes
from middleware.pipeline.editing import EditResult
from middleware.revise.clauses import edited_clause
from middleware.revise.gate_rules import (
    PROPOSAL_RULES,
    Proposal,
    Refusal,
    checked_names,
    first_refusal,
    form_refusal,
    shares_enough,
    under_title,
)
from middleware.revise.values import claim_slot
from middleware.types import NLI_LABELS, Edit, Passage, Revision, Verdict

_ENTAIL = NLI_LABELS.index("attributable")
_CONTRADICT = NLI_LABELS.index("contradictory")


@dataclass(frozen=True)
class GatePolicy:
    min_entailment: float = 0.5
    max_context_contradiction: float = 0.5
    grounded_entailment: float = 0.5  # P(entailment) enough for a clean swap the slots verifier finds wholly stated
    wording: bool = False  # also apply edits of words that are no number, date or name (verbs, negation)
    supported_edit: float | None = None  # the verifier's P(attributable) the edited sentence needs (its combiner's)
    grounded_supported: float | None = None  # that P for a clean swap the slots verifier finds wholly stated


class EditGate:
    """Decides whether an editor's revision may replace the sentence (see the module doc).
    ``disabled``: gate rules switched off by name (``GATE_RULES``); ``policy.wording``
    switches ``values_only`` off too."""

    def __init__(
        self,
        verifier: Verifier,
        nli: NLIVerifier | None,
        policy: GatePolicy | None = None,
        slots: SlotsVerifier | None = None,
        disabled: Iterable[str] = (),
    ) -> None:
        self.verifier = verifier
        self.nli = nli
        self.policy = policy or GatePolicy()
        self.slots = slots
        self.disabled = checked_names(disabled) | ({"values_only"} if self.policy.wording else frozenset())

    def enabled(self, rule: str) -> bool:
        return rule not in self.disabled

    async def review(
        self, result: EditResult, evidence: list[Passage], context: str | None = None
    ) -> Revision:
        if not result.changed:
            return Revision(status="flagged", reason=result.rejected or "no edit was found")
        named = [e.evidence for e in result.edits]
        if self.enabled("one_evidence_sentence") and (None in named or len(set(named)) != 1):
            return _flagged(result, Refusal("one_evidence_sentence", "the edits do not come from one evidence sentence"))
        grounding = next((s for s in named if s is not None), None)
        if grounding is None:  # nothing to re-verify against, whatever is switched off
            return _flagged(result, Refusal("one_evidence_sentence", "no change names an evidence sentence"))
        passage = _passage_of(result, evidence)
        proposal = Proposal(result, grounding, passage)
        refusal = form_refusal(result, grounding, self.disabled) or first_refusal(PROPOSAL_RULES, proposal, self.disabled)
        if refusal is not None:
            return _flagged(result, refusal, grounding)
        check = await self._recheck(result, grounding, passage, context)
        check.field_swap = proposal.field_swap
        for name, rule in RECHECK_RULES.items():
            if self.enabled(name) and (reason := await rule(check)) is not None:
                return _flagged(result, Refusal(name, reason), grounding, check.scores)
        return Revision(
            status="applied",
            reason="the evidence sentence contradicts the original and supports the edit",
            suggested=result.text,
            evidence_id=result.evidence_id,
            evidence_sentence=grounding,
            scores=check.scores,
        )

    async def _recheck(
        self, result: EditResult, grounding: str, passage: Passage | None, context: str | None
    ) -> Recheck:
        """The evidence sentence's readings, and what the verifier and the NLI model find in them."""
        text, title = (passage.text, passage.title) if passage is not None else (None, None)
        premises = [evidence_premise(grounding, None, title), evidence_premise(grounding, text, title)]
        single = _titled(premises[0], title, passage.id if passage else "evidence")
        premises.append(single[0].text)  # and under its title: 'its tilt' is the tower's
        if (supported := _with_support(grounding, text, title, result.text)) is not None:
            premises.append(supported)
        premises = list(dict.fromkeys(premises))
        before = await self.verifier.verify(result.original, single, context)
        after = await self.verifier.verify(result.text, single, context)
        # the clause the edit changes, read alone beside the whole sentence (``clauses``)
        clause = edited_clause(result.original, result.edits)
        clause_after = await self.verifier.verify(clause[1], single, context) if clause else None
        scores: dict[str, float] = {}
        if self.nli is not None:  # the sentence alone, with the one it continues, or under its title: the best reading
            hypotheses = [result.original, result.text, *([clause[1]] if clause else [])]
            probs = await self.nli.probabilities([(p, h) for p in premises for h in hypotheses])
            step = len(hypotheses)
            scores["evidence_contradicts_original"] = round(float(probs[0::step, _CONTRADICT].max()), 4)
            scores["evidence_entails_edited"] = round(float(probs[1::step, _ENTAIL].max()), 4)
            if clause is not None:
                scores["evidence_entails_edited_clause"] = round(float(probs[2::step, _ENTAIL].max()), 4)
        return Recheck(self, result, single, context, before, after, scores, clause, clause_after)


@dataclass
class Recheck:
    """What the re-verification rules read: the revision, its evidence sentence as the
    verifiers read it (``single``), the verifier's verdicts on the original (``before``) and
    the edit (``after``) from that sentence alone, and the NLI scores, to which a rule may
    add its own (they are reported with the decision)."""

    gate: EditGate
    result: EditResult
    single: list[Passage]
    context: str | None
    before: Verdict
    after: Verdict
    scores: dict[str, float] = field(default_factory=dict)
    clause: tuple[str, str] | None = None  # the clause the edit changes, as written and as edited
    clause_after: Verdict | None = None  # the verifier's verdict on the edited clause
    _grounded_once: bool | None = field(default=None, repr=False)
    field_swap: bool = False
    """A record's own value put in place of one the data states otherwise (a number no field
    holds, an opening time the schedule does not give those days: ``gate_rules.field_swap``,
    read once by the gate): the edit is checked against the record by the field itself
    (``fields.swaps_field``), not by the NLI model, which reads a record's figures and times
    loosely (why ``field_value`` and ``field_hours`` stand against it); ``edit_supported`` and
    ``entails_edit`` pass it, ``edit_not_contradicted`` still reads it."""

    def supported(self) -> float:
        """The verifier's P(attributable) of the edit: of the edited sentence, or of the
        clause the edit changes where the sentence has more than one."""
        readings = [self.after, *([self.clause_after] if self.clause_after is not None else [])]
        return max(v.scores.get("attributable", 0.0) for v in readings)

    async def grounded(self) -> bool:
        """``_grounded``, read once: both ``edit_supported`` and ``entails_edit`` ask it, and it
        runs the slots verifier on the edit (and on its clause)."""
        if self._grounded_once is None:
            self._grounded_once = await _grounded(self)
        return self._grounded_once

    def entailed(self) -> float | None:
        """The NLI model's P(entailment) of the edit, best reading, sentence or edited clause."""
        found = [self.scores[k] for k in ("evidence_entails_edited", "evidence_entails_edited_clause") if k in self.scores]
        return max(found) if found else None


RecheckRule = Callable[[Recheck], Awaitable[str | None]]


async def contradicts_original(check: Recheck) -> str | None:
    if check.before.label != "contradictory" and not _replaces_disagreeing_slots(check.result):
        return "the evidence sentence does not contradict the original sentence"
    return None


async def edit_not_contradicted(check: Recheck) -> str | None:
    if check.after.label == "contradictory":
        return "the evidence sentence also contradicts the edited sentence"
    return None


async def edit_supported(check: Recheck) -> str | None:
    """The verifier's P(attributable) of the edit from its evidence sentence reaches the
    combiner's edit threshold; a clean swap that the slots verifier finds wholly stated
    (``Recheck.grounded``, as for ``entails_edit``) needs only ``grounded_supported`` (the
    combiner's decision threshold): 'Fifteen passengers were evaluated by medical personnel
    at the airport, but none were transported' from '... were examined ..., but no one was
    transported ...' reads P=0.72 for its paraphrased verbs, the figure being the
    evidence's own (RAGTruth train)."""
    policy = check.gate.policy
    supported = check.supported()
    threshold = policy.supported_edit
    if threshold is None or supported >= threshold or check.field_swap:
        return None
    grounded_floor = policy.grounded_supported
    if grounded_floor is not None and supported >= grounded_floor and await check.grounded():
        return None
    return (
        f"the verifier does not find the edited sentence supported by the evidence sentence "
        f"(P={supported:.2f} < {threshold:.2f})"
    )


async def slots_stated(check: Recheck) -> str | None:
    """Without an NLI model, the slots verifier's reading of the edit stands in for
    ``entails_edit``; a record's field value swap is checked by the field, as there."""
    if check.gate.nli is None and not check.field_swap and not _slots_all_stated(check.after):
        return "the evidence sentence does not state every slot of the edited sentence"
    return None


async def entails_edit(check: Recheck) -> str | None:
    policy, entailed = check.gate.policy, check.entailed()
    if check.gate.nli is None or entailed is None or entailed >= policy.min_entailment or check.field_swap:
        return None
    floor = policy.grounded_entailment if await check.grounded() else policy.min_entailment
    if entailed < floor:
        return f"the evidence sentence does not entail the edited sentence (P={entailed:.2f} < {floor:.2f})"
    return None


async def context_consistent(check: Recheck) -> str | None:
    """Refuses only where the answer already stated a value the edit replaces (the edit would
    make the answer say two things) and the NLI model finds the edited sentence contradicting
    the earlier text more than the original did. A contradiction the NLI model reads into
    another fact of the answer ("She shared the 1903 Nobel Prize in Physics" against "... in
    Chemistry, in 1911") is no reason: the demo's right fix was refused for it."""
    nli, result = check.gate.nli, check.result
    if not check.context or nli is None:
        return None
    stated = [e.original for e in result.edits if states_value(check.context, e.original)]
    if not stated:
        return None
    probs = await nli.probabilities([(check.context, result.original), (check.context, result.text)])
    check.scores["context_contradicts_edited"] = round(float(probs[1, _CONTRADICT]), 4)
    worse = probs[1, _CONTRADICT] > probs[0, _CONTRADICT]
    if worse and probs[1, _CONTRADICT] >= check.gate.policy.max_context_contradiction:
        return f"the answer already said {stated[0]!r} earlier: the edited sentence would contradict it"
    return None


RECHECK_RULES: dict[str, RecheckRule] = {
    "contradicts_original": contradicts_original,
    "edit_not_contradicted": edit_not_contradicted,
    "edit_supported": edit_supported,
    "slots_stated": slots_stated,
    "entails_edit": entails_edit,
    "context_consistent": context_consistent,
}
"""The re-verification rules, in order, after the form and proposal rules."""


async def _grounded(check: Recheck) -> bool:
    """Every change swaps a disagreeing value for the evidence sentence's, and the slots
    verifier finds the edited sentence wholly stated by that sentence, read under its
    passage's title (what the passage is about: 'Paris' for 'The city proper had a
    population of about 2.1 million in 2021')."""
    slots, result = check.gate.slots, check.result
    if slots is None or not _replaces_disagreeing_slots(result):
        return False
    grounding = result.edits[0].evidence
    if grounding is None or not all(same_role(result.original, edit, grounding) for edit in result.edits):
        return False
    texts = [result.text, *([check.clause[1]] if check.clause is not None else [])]
    for text in texts:
        if (await slots.verify(text, check.single, check.context)).label == "attributable":
            return True
    return False


def _with_support(sentence: str, passage: str | None, title: str | None, edited: str) -> str | None:
    """The evidence sentence with the sentences of its passage that state the rest of the
    edited sentence, in passage order and under the title: an edit of one clause ('designed
    by the Danish architect Jørn Utzon') leaves another clause ('formally opened by Queen
    Elizabeth II on 20 October 1973') that another sentence of the passage states. The
    edit's values still come from the one sentence; this reading only lets the NLI see that
    the rest of the sentence is stated too. None where some value of the edited sentence is
    in no sentence of the passage, or where the evidence sentence needs no other."""
    if passage is None:
        return None
    texts = [passage[s:e].strip() for s, e in split_sentences(passage) if passage[s:e].strip()]
    chosen = {sentence.strip()}
    claim_terms = terms(edited)
    for slot in analyse(edited).slots:
        if writes(sentence, slot) or (title and writes(title, slot)):
            continue
        found = next((t for t in texts if _states_for(slot, t, claim_terms, title)), None)
        if found is None:
            return None
        chosen.add(found)
    if len(chosen) == 1:
        return None
    ordered = [t for t in texts if t in chosen]
    if sentence.strip() not in ordered:
        ordered.append(sentence.strip())
    return under_title(" ".join(ordered), title)


def _states_for(slot: Slot, text: str, claim_terms: tuple[str, ...], title: str | None) -> bool:
    """``text`` states the slot as the claim has it: a name anywhere (it says who); a number or
    a date only in a sentence about the claim, one that (under its passage title) states at
    least ``MIN_SHARED`` of the claim's words ('In 1859 he married Marie' does not state the
    1859 of 'Pierre Curie was born in Paris in 1859'; 'On 17 December 1903 ... their Wright
    Flyer made the first ... flight' states the 1903 of 'Orville Wright's first flight in
    1903')."""
    if not writes(text, slot):
        return False
    return slot.kind == "entity" or shares_enough(claim_terms, text, title)


def _titled(premise: str, title: str | None, passage_id: str) -> list[Passage]:
    """The evidence sentence as the verifiers read it: under its passage's title when the
    sentence does not name it (what the passage is about: 'Paris' for 'The city proper had a
    population of about 2.1 million in 2021', 'Wimbledon Championships' for 'The women's
    singles was added in 1884')."""
    text = under_title(premise, title)
    return [Passage(id=passage_id, text=text, title=title, provider="gate", source="gate")]


def _flagged(
    result: EditResult, refusal: Refusal, grounding: str | None = None, scores: dict[str, float] | None = None
) -> Revision:
    """The revision refused: the sentence stays as written, with what was suggested, why, and
    the rule that refused it."""
    return Revision(
        status="flagged",
        reason=refusal.reason,
        rule=refusal.rule,
        suggested=result.text,
        evidence_id=result.evidence_id,
        evidence_sentence=grounding,
        scores=scores or {},
    )


def _replaces_disagreeing_slots(result: EditResult) -> bool:
    """Every change swaps a slot for a comparable one of the evidence that disagrees with it
    ('1915' -> '1911', 'Atlantis' -> 'Discovery')."""
    for edit in result.edits:
        old, new = analyse(edit.original).slots, analyse(edit.replacement).slots
        if len(old) != 1 or len(new) != 1 or slots_agree(old[0], new[0]) is not False:
            return False
    return bool(result.edits)


def same_role(sentence: str, edit: Edit, evidence: str) -> bool:
    """The evidence sentence gives the new value to the word or the verb the replaced one
    hangs on in the claim ('by about 3.8 centimetres' of 'moving away' is not replaced by
    the diameter's 'about 3,474 kilometres' of 'is')."""
    mine = claim_slot(sentence, edit)
    theirs = next((s for s in analyse(evidence).slots if edit.replacement.strip() in s.text), None)
    if mine is None or theirs is None:
        return False
    return mine.role.head == theirs.role.head or mine.role.verb is not None and mine.role.verb == theirs.role.verb



def _slots_all_stated(verdict: Verdict) -> bool:
    if verdict.label == "attributable":
        return True
    return isinstance(verdict, DetailedVerdict) and not verdict.unsupported and not verdict.mismatches


def _passage_of(result: EditResult, evidence: list[Passage]) -> Passage | None:
    if result.evidence_index is not None and 0 <= result.evidence_index < len(evidence):
        return evidence[result.evidence_index]
    return next((p for p in evidence if p.id == result.evidence_id), None)


_LEADING_PRONOUN = re.compile(
    r"^(?P<lead>(?:(?:In|On|By|From|After|Before|During|Since|Until)\b[^,]{0,40}?\s)?)"
    r"(?P<pronoun>He|She|It|he|she|it|His|Her|Its|his|her|its)\b"
)


def evidence_premise(sentence: str, passage: str | None, topic: str | None = None) -> str:
    """The evidence sentence, standing alone. A subject pronoun at its start, or after a short
    opening phrase ('In 1721 he dedicated ...'), becomes the passage's ``topic`` (its title:
    'Johann Sebastian Bach'), and the sentence before it in its passage is put in front (the
    sentence it continues). The values of an edit still come from the one sentence."""
    match = _LEADING_PRONOUN.match(sentence)
    if match is None:
        return sentence
    standalone = sentence
    if topic:
        pronoun = match.group("pronoun")
        name = f"{topic}'s" if pronoun.lower() in ("his", "her", "its") else topic
        standalone = sentence[: match.start("pronoun")] + name + sentence[match.end("pronoun") :]
    at = passage.find(sentence) if passage is not None else -1
    if passage is None or at <= 0:
        return standalone
    # the sentence it continues, too: 'She received the 1911 Nobel Prize ...' after 'She shared
    # the 1903 Nobel Prize ...' is what supports 'a second Nobel Prize'
    previous = [passage[s:e] for s, e in split_sentences(passage[:at]) if passage[s:e].strip()]
    return f"{previous[-1].strip()} {standalone}" if previous else standalone

