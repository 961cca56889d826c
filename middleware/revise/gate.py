"""The edit gate: correct mode rewrites a sentence only when the edit is grounded and
re-verified. A wrong correction is worse than none, so every doubt leaves the sentence as
written (flagged, with the reason).

An editor's revision is applied only if

1. every change names one and the same evidence sentence (its slots all come from it),
   which states enough of the claim's other words to be about it (``about_the_claim``),
   whose titled passage names the sentence's subject (``_subject_absent``), no
   name it replaces is one the evidence passage states for something else (then the claim
   may have the wrong verb: 'born in Oxford' where he was born in Harrow and died in
   Oxford), and each change is a well-formed value swap (``form_problem``): a number, date
   or name for one of its kind (other wording only with ``GatePolicy.wording``), no name
   dropped for a pronoun, no name the sentence already has elsewhere, no name the evidence
   sentence also names (that is a swapped role, not a wrong name), the resulting name as
   the evidence writes it, no 'one' before a plural noun, and the value of the claim's role
   (``value_problem``: a shared name right by it, else the verbs);
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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from middleware.evidence.lexical import term_recall, terms
from middleware.pipeline.lexicon import NAME_WORD, PRONOUNS
from middleware.pipeline.names import FIRM_SUFFIXES, mentions, names_match, normalise_name
from middleware.pipeline.sentences import split_sentences
from middleware.pipeline.slots import Slot, analyse, named_subject, slots_agree
from middleware.pipeline.verifiers.base import DetailedVerdict, Verifier
from middleware.pipeline.verifiers.nli import NLIVerifier
from middleware.pipeline.verifiers.slots_verifier import SlotsVerifier, writes
from middleware.revise.base import EditResult
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


class EditGate:
    """Decides whether an editor's revision may replace the sentence (see the module doc)."""

    def __init__(
        self,
        verifier: Verifier,
        nli: NLIVerifier | None,
        policy: GatePolicy | None = None,
        slots: SlotsVerifier | None = None,
    ) -> None:
        self.verifier = verifier
        self.nli = nli
        self.policy = policy or GatePolicy()
        self.slots = slots

    async def review(
        self, result: EditResult, evidence: list[Passage], context: str | None = None
    ) -> Revision:
        if not result.changed:
            return Revision(status="flagged", reason=result.rejected or "no edit was found")
        sentences = {e.evidence for e in result.edits}
        if None in sentences or len(sentences) != 1:
            return _flagged(result, "the edits do not come from one evidence sentence")
        grounding = next(iter(sentences))
        assert grounding is not None
        if (problem := form_problem(result, grounding, self.policy.wording)) is not None:
            return _flagged(result, problem, grounding)
        passage = _passage_of(result, evidence)
        text, title = (passage.text, passage.title) if passage is not None else (None, None)
        if not about_the_claim(result, grounding, title):
            return _flagged(
                result, "the evidence sentence is not about what the sentence says: it shares too few of its "
                "other words", grounding,
            )  # fmt: skip
        if (absent := _subject_absent(result, text or grounding, title)) is not None:
            return _flagged(
                result, f"the evidence passage{f' ({title})' if title else ''} never names '{absent}': it is "
                "about something else", grounding,
            )  # fmt: skip
        if text is not None and (named := _named_elsewhere(result, text)) is not None:
            return _flagged(
                result, f"the evidence names '{named}' for something else: the claim may have the wrong "
                "verb, not the wrong name", grounding,
            )  # fmt: skip
        premises = [evidence_premise(grounding, None, title), evidence_premise(grounding, text, title)]
        single = _titled(premises[0], title, passage.id if passage else "evidence")
        premises.append(single[0].text)  # and under its title: 'its tilt' is the tower's
        if (supported := _with_support(grounding, text, title, result.text)) is not None:
            premises.append(supported)
        premises = list(dict.fromkeys(premises))
        before = await self.verifier.verify(result.original, single, context)
        after = await self.verifier.verify(result.text, single, context)
        scores: dict[str, float] = {}
        if self.nli is not None:  # the sentence alone, with the one it continues, or under its title: the best reading
            probs = await self.nli.probabilities(
                [pair for premise in premises for pair in ((premise, result.original), (premise, result.text))]
            )
            scores["evidence_contradicts_original"] = round(float(probs[0::2, _CONTRADICT].max()), 4)
            scores["evidence_entails_edited"] = round(float(probs[1::2, _ENTAIL].max()), 4)

        def flag(reason: str) -> Revision:
            return _flagged(result, reason, grounding, scores)

        if before.label != "contradictory" and not _replaces_disagreeing_slots(result):
            return flag("the evidence sentence does not contradict the original sentence")
        if after.label == "contradictory":
            return flag("the evidence sentence also contradicts the edited sentence")
        supported = after.scores.get("attributable", 0.0)
        if self.policy.supported_edit is not None and supported < self.policy.supported_edit:
            return flag(
                f"the verifier does not find the edited sentence supported by the evidence sentence "
                f"(P={supported:.2f} < {self.policy.supported_edit:.2f})"
            )
        if self.nli is None and not _slots_all_stated(after):
            return flag("the evidence sentence does not state every slot of the edited sentence")
        if self.nli is not None and scores["evidence_entails_edited"] < self.policy.min_entailment:
            floor = self.policy.min_entailment
            if await self._grounded(result, single, context):
                floor = self.policy.grounded_entailment
            if scores["evidence_entails_edited"] < floor:
                return flag(
                    f"the evidence sentence does not entail the edited sentence "
                    f"(P={scores['evidence_entails_edited']:.2f} < {floor:.2f})"
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


    async def _grounded(self, result: EditResult, single: list[Passage], context: str | None) -> bool:
        """Every change swaps a disagreeing value for the evidence sentence's, and the slots
        verifier finds the edited sentence wholly stated by that sentence, read under its
        passage's title (what the passage is about: 'Paris' for 'The city proper had a
        population of about 2.1 million in 2021')."""
        if self.slots is None or not _replaces_disagreeing_slots(result):
            return False
        grounding = result.edits[0].evidence
        if grounding is None or not all(same_role(result.original, edit, grounding) for edit in result.edits):
            return False
        return (await self.slots.verify(result.text, single, context)).label == "attributable"


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
    return _under_title(" ".join(ordered), title)


def _states_for(slot: Slot, text: str, claim_terms: tuple[str, ...], title: str | None) -> bool:
    """``text`` states the slot as the claim has it: a name anywhere (it says who); a number or
    a date only in a sentence about the claim, one that (under its passage title) states at
    least ``_MIN_SHARED`` of the claim's words ('In 1859 he married Marie' does not state the
    1859 of 'Pierre Curie was born in Paris in 1859'; 'On 17 December 1903 ... their Wright
    Flyer made the first ... flight' states the 1903 of 'Orville Wright's first flight in
    1903')."""
    if not writes(text, slot):
        return False
    return slot.kind == "entity" or _shares_enough(claim_terms, text, title)


def _titled(premise: str, title: str | None, passage_id: str) -> list[Passage]:
    """The evidence sentence as the verifiers read it: under its passage's title when the
    sentence does not name it (what the passage is about: 'Paris' for 'The city proper had a
    population of about 2.1 million in 2021', 'Wimbledon Championships' for 'The women's
    singles was added in 1884')."""
    text = _under_title(premise, title)
    return [Passage(id=passage_id, text=text, title=title, provider="gate", source="gate")]


def _flagged(
    result: EditResult, reason: str, grounding: str | None = None, scores: dict[str, float] | None = None
) -> Revision:
    """The revision refused: the sentence stays as written, with what was suggested and why."""
    return Revision(
        status="flagged",
        reason=reason,
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
    mine = _claim_slot(sentence, edit)
    theirs = next((s for s in analyse(evidence).slots if edit.replacement.strip() in s.text), None)
    if mine is None or theirs is None:
        return False
    return mine.role.head == theirs.role.head or mine.role.verb is not None and mine.role.verb == theirs.role.verb


_MIN_SHARED = 0.3
"""Share of the claim's unchanged content words its evidence sentence (under its passage
title) must state. Every edit of the planted benchmark's 150 shares at least 0.47 (a
two-clause sentence whose evidence sentence holds one clause); a value taken from an
unrelated sentence shares next to none ('began work on the Last Supper in 1490' and 'The
UN, over 2008, conducted a study')."""


def about_the_claim(result: EditResult, evidence: str, title: str | None = None) -> bool:
    """The evidence sentence speaks of what the claim speaks of: it (with its passage's
    title) states at least ``_MIN_SHARED`` of the claim's content words outside the changed
    spans. A check on the words, whatever verifier or editor proposed the edit."""
    kept = list(result.original)
    for edit in result.edits:
        kept[edit.start : edit.end] = " " * (edit.end - edit.start)
    claim_terms = terms("".join(kept))
    return not claim_terms or _shares_enough(claim_terms, evidence, title)


def _shares_enough(claim_terms: tuple[str, ...], text: str, title: str | None) -> bool:
    """``text``, read under its passage title, states at least ``_MIN_SHARED`` of the claim's terms."""
    return term_recall(claim_terms, terms(_under_title(text, title))) >= _MIN_SHARED


def _under_title(text: str, title: str | None) -> str:
    """The text under its passage's title, where it does not name it already."""
    return f"{title}. {text}" if title and title not in text else text


def _subject_absent(result: EditResult, passage: str, title: str | None) -> str | None:
    """The sentence's named subject, where the edit keeps it and the evidence passage, which
    has a title (so what it is about is known), names it nowhere: 'Its surface lies about 28
    metres below sea level' under 'Caspian Sea' shares most words of 'Machu Picchu lies
    about 3,430 metres above sea level' but is about another place, and an NLI model may
    still find it entails the edited sentence. A passage without a title may be about the
    subject under a pronoun ('It freezes at ...'), so it is not judged here."""
    subject = named_subject(analyse(result.original))
    if title is None or subject is None:
        return None
    if any(subject.start < edit.end and edit.start < subject.end for edit in result.edits):
        return None
    return None if mentions(_under_title(passage, title), subject.text) else subject.text


def _named_elsewhere(result: EditResult, passage: str) -> str | None:
    """A name the edit replaces that the evidence passage states itself: 'Roger Bannister was
    born in Oxford' against a passage where he was born in Harrow and died in Oxford is as
    likely a wrong verb as a wrong place, so 'Harrow' is no safe fix."""
    text = f" {normalise_name(passage)} "
    for edit in result.edits:
        old = edit.original.strip()
        is_name = old[:1].isupper() or any(s.kind == "entity" for s in analyse(old).slots)
        if is_name and (name := normalise_name(old)) and f" {name} " in text:
            return old
    return None


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


_NAME_LINKS = frozenset({"the", "of", "de", "von", "van", "da", "del", "la", "le", "du"})
_SINGULAR = frozenset({"one", "1", "a", "an", "single"})


def form_problem(result: EditResult, evidence_sentence: str, wording: bool = False) -> str | None:
    """Why the changes of ``result`` are not well-formed value swaps, or None."""
    for edit in result.edits:
        if (problem := _edit_problem(result.original, result.text, edit, evidence_sentence, wording)) is not None:
            return problem
    return None


def _edit_problem(original: str, edited: str, edit: Edit, evidence: str, wording: bool) -> str | None:
    old, new = edit.original, edit.replacement
    old_slots, new_slots = analyse(old).slots if old.strip() else (), analyse(new).slots if new.strip() else ()
    names = old.strip()[:1].isupper() and new.strip()[:1].isupper() and old.strip() != original.strip()[: len(old.strip())]
    if not old_slots and not names and not wording:
        return f"'{old}' -> '{new}' changes wording, not a number, date or name: flagged, not rewritten"
    if _words(new) & PRONOUNS - _words(old):
        return f"'{old}' -> '{new}' would put a pronoun in place of a name"
    if re.search(r"\d", old) and not re.search(r"\d", new):
        return f"'{old}' -> '{new}' would put words in place of a figure"
    if (at := evidence.find(new.strip())) >= 0 and era(original, edit.start, edit.end) != era(
        evidence, at, at + len(new.strip())
    ):
        return f"'{old.strip()}' -> '{new.strip()}' would change the era (BC / AD)"
    if new[:1].isupper() or any(s.kind == "entity" for s in new_slots):
        rest = original[: edit.start] + " " + original[edit.end :]
        if new.strip() and new.strip().lower() in rest.lower():
            return f"the sentence already names '{new.strip()}': swapping it in would name it twice"
        if old_slots[:1] and old_slots[0].kind == "entity" and mentions(evidence, _whole_name(original, edit)):
            return f"the evidence names '{old.strip()}' too: a swapped role, not a wrong name"
        run = name_run(edited, edited.find(new) if new in edited else -1, len(new))
        if run and run not in evidence:
            return f"the evidence does not name '{run}'"
        stated = name_run(evidence, evidence.find(new.strip()), len(new.strip()))
        shortened = stated.endswith(run) and len(old.split()) == 1  # a surname for a surname: 'Einstein'
        if run and stated and stated != run and run in stated and not shortened:
            return f"the evidence names '{stated}', the edit would write '{run}'"
    if (problem := kind_problem(original, edit, evidence)) is not None:
        return problem
    if (problem := value_problem(old, original, new, evidence)) is not None:
        return problem
    if new.strip()[:1].isupper() and edited.count(new.strip()) > max(1, original.count(new.strip())):
        return f"the edited sentence would name '{new.strip()}' twice"
    if _singular_before_plural(edited, new):
        return f"'{new}' would stand before a plural noun"
    return None


def kind_problem(sentence: str, edit: Edit, evidence: str) -> str | None:
    """Why the replacement is not a value of the same kind as what it replaces, or None: a
    number for a number, a date for a date, a name for a name of the same type (a person for
    a person, a place for a place; a proper noun the NER left unlabelled matches any name),
    and a whole number, date or name of the evidence sentence, not a phrase cut from
    something else ('NLP' -> 'Meme Status Submission Type', a heading of an unrelated page)."""
    mine = _claim_slot(sentence, edit)
    new = edit.replacement.strip()
    if mine is None or not new:
        return None  # no value is replaced: a wording edit, flagged elsewhere unless allowed
    holders = [s for s in analyse(evidence).slots if _whole_value(new, s, edit.original.strip())]
    if not holders:
        return f"the evidence sentence states '{new}' as no number, date or name: not a value to swap in"
    if not any(_same_kind(mine, theirs) for theirs in holders):
        return f"'{edit.original.strip()}' -> '{new}' would put a {holders[0].group} in place of a {mine.group}"
    return None


_FIGURES = frozenset({"number", "quantity"})


def _whole_value(new: str, slot: Slot, old: str) -> bool:
    """``new`` is the evidence's whole value: the slot itself, its figure without the unit or
    qualifier ('330' of '330 metres', '4 degrees' of 'about 4 degrees') for a figure, a coarser date ('1867' of '7 November 1867'), or its last words for as many words of a name
    (a surname for a surname: 'Einstein' of 'Albert Einstein'), or a firm's name without its
    'Company'."""
    if new == slot.text:
        return True
    if slot.kind in _FIGURES or slot.kind == "date":  # '4 degrees' of 'about 4 degrees', '1867' of '7 November 1867'
        return re.search(rf"(?<![\w.,]){re.escape(new)}(?![\w.,]\d|\w)", slot.text) is not None and any(
            c.isdigit() for c in new
        )
    if slot.kind != "entity":
        return False
    words = slot.text.split()
    if words[-1].lower().strip(".") in FIRM_SUFFIXES and " ".join(words[:-1]) == new:
        return True  # a firm's name without its 'Company' ('Thomson-Houston' of 'Thomson-Houston Company')
    tail = " ".join(words[-len(new.split()) :])
    return tail == new and len(new.split()) == len(old.split()) < len(words)


def _same_kind(mine: Slot, theirs: Slot) -> bool:
    """Names of one type (or one of them untyped), dates, or figures of one dimension."""
    if mine.kind in _FIGURES and theirs.kind in _FIGURES:
        dimensions = {g for g in (mine.group, theirs.group) if g != "quantity:bare" and g.startswith("quantity:")}
        return len(dimensions) <= 1
    if mine.kind != theirs.kind:
        return False
    return mine.kind == "date" or mine.group == theirs.group or "propn" in (mine.group, theirs.group)


def _whole_name(sentence: str, edit: Edit) -> str:
    """The claim's whole name the edit changes part of ('Westinghouse Electric Company' for
    'Westinghouse Electric'), so it is looked for as the name it is (a firm's name ends in
    no surname)."""
    whole = _claim_slot(sentence, edit, "entity")
    return whole.text if whole is not None else edit.original.strip()


def _claim_slot(sentence: str, edit: Edit, kind: str | None = None) -> Slot | None:
    """The slot of ``sentence`` (of ``kind``) that holds the edited span."""
    return next(
        (s for s in analyse(sentence).slots
         if (kind is None or s.kind == kind) and s.start <= edit.start and edit.end <= s.end),
        None,
    )  # fmt: skip


_ERA_WORD = r"(BCE|BC|CE|AD|B\.C\.(?:E\.)?|A\.D\.)"
_ERA_AFTER = re.compile(rf"\s*{_ERA_WORD}(?!\w)", re.IGNORECASE)
_ERA_AT_END = re.compile(rf"\b{_ERA_WORD}\s*$", re.IGNORECASE)


def era(text: str, start: int, end: int) -> str:
    """'BC' or 'AD' for the value ``text[start:end]``: the era written at its end or right
    after it ('2nd century BCE', '753 BC'), AD where none is. A swap must keep it: '2018'
    from 'opened in 2018' would make '2nd century BCE' '2018 BCE', and '1753' for '753 BC'
    would drop the BC."""
    found = _ERA_AT_END.search(text[start:end]) or _ERA_AFTER.match(text, end)
    return "BC" if found is not None and found.group(1).upper().startswith("B") else "AD"


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[\w']+", text)}


def name_run(text: str, start: int, length: int) -> str:
    """The whole capitalised name around ``text[start:start + length]`` ('Ivan IV the Great')."""
    if start < 0:
        return ""
    tokens = [(m.start(), m.end(), m.group()) for m in re.finditer(r"[\w'’.-]+", text)]
    inside = [i for i, (s, e, _) in enumerate(tokens) if s < start + length and start < e]
    if not inside:
        return ""

    def is_name(i: int) -> bool:
        return 0 <= i < len(tokens) and bool(NAME_WORD.fullmatch(tokens[i][2]))

    def linked(i: int, step: int) -> bool:  # 'the' in 'Peter the Great'
        return 0 <= i < len(tokens) and tokens[i][2] in _NAME_LINKS and is_name(i + step)

    def spaced(i: int, j: int) -> bool:  # nothing but spaces between tokens i and j
        return 0 <= i < len(tokens) and 0 <= j < len(tokens) and not text[tokens[i][1] : tokens[j][0]].strip()

    first, last = inside[0], inside[-1]
    while (is_name(first - 1) or linked(first - 1, -1)) and spaced(first - 1, first):
        first -= 1
    while (is_name(last + 1) or linked(last + 1, 1)) and spaced(last, last + 1):
        last += 1
    run = text[tokens[first][0] : tokens[last][1]].rstrip(".")
    return run if NAME_WORD.match(run) else ""


def _singular_before_plural(text: str, new: str) -> bool:
    """'completing one orbits': a singular number swapped in before a plural noun."""
    at = text.find(new)
    if at < 0 or new.strip().lower() not in _SINGULAR:
        return False
    doc = analyse(text).doc
    following = [t for t in doc if t.idx >= at + len(new)]
    return bool(following) and following[0].tag_ in ("NNS", "NNPS")


def role_mismatch(old: str, sentence: str, new: str, evidence: str) -> str | None:
    """Why ``new`` (a value of the evidence sentence) is not the value of ``old``'s role: the
    evidence gives ``new`` to another verb while another value of the same kind belongs to
    the verb ``old`` hangs on ('founded in 1897' with 'founded in 1887 and inaugurated in
    1888': 1887, not 1888). None when roles agree or cannot be told."""
    claim = analyse(sentence)
    mine = next((s for s in claim.slots if s.text == old.strip() or old.strip() in s.text), None)
    if mine is None or mine.role.verb is None:
        return None
    stated = analyse(evidence).slots
    holding = [s for s in stated if s.text == new.strip() or new.strip() in s.text]
    if not holding or any(s.role.verb in (None, mine.role.verb) for s in holding):
        return None  # the value (somewhere in the sentence) belongs to the claim's verb, or roles are unknown
    theirs = holding[0]
    rival = next((s for s in stated if s is not theirs and s.group == theirs.group and s.role.verb == mine.role.verb), None)
    if rival is None:
        return None
    return f"the evidence gives '{new.strip()}' to '{theirs.role.verb}' and '{rival.text}' to '{mine.role.verb}'"


def value_problem(old: str, sentence: str, new: str, evidence: str) -> str | None:
    """Why ``new`` (a value of the evidence sentence) is not the value the claim's ``old``
    stands for, or None. What the claim is about decides first: when a name the claim and the
    evidence share stands right by ``new`` it is the value ('... followed by Pride and
    Prejudice in 1813'), when every shared name sits nearest another value it is not;
    otherwise verbs decide (``role_mismatch``: 'FIDE, was founded in Paris on 20 July 1924,
    and it took control of the championship in 1948' gives 'took control' 1948, though
    'FIDE' sits nearer 1924)."""
    anchored = _anchored_value(old, sentence, new, evidence)
    if anchored == "beside":
        return None
    if anchored == "elsewhere":
        return f"in the evidence sentence another value than '{new.strip()}' goes with what the claim is about"
    return role_mismatch(old, sentence, new, evidence)


_BESIDE = 5
"""Characters at most between a shared name and its value for the name to decide alone ('Pride
and Prejudice in 1813', 'A Tale of Two Cities (1859)')."""


def _anchored_value(old: str, sentence: str, new: str, evidence: str) -> str | None:
    """'beside': a name the claim and the evidence share stands right by ``new`` and nearer it
    than any other value; 'near': such a name is nearest ``new``, further off; 'elsewhere':
    every shared name is nearest another value; None: no shared name or no choice."""
    claim = analyse(sentence)
    mine = next((s for s in claim.slots if old.strip() and old.strip() in s.text), None)
    stated = analyse(evidence).slots
    others = [c for c in claim.slots if c is not mine]
    # the evidence's values of the claim's type, but for those that state another slot of the
    # claim ('32 piano sonatas and one opera, Fidelio': 'one' is the claim's own 'one')
    values = [
        s for s in stated
        if mine is not None and s.kind != "entity" and s.group == mine.group
        and not any(slots_agree(c, s) for c in others)
    ]  # fmt: skip
    chosen = [s for s in values if new.strip() and new.strip() in s.text]
    if mine is None or len(values) < 2 or not chosen:
        return None
    anchors = [
        e for e in stated
        if e.kind == "entity" and any(c.kind == "entity" and names_match(c.text, e.text) for c in claim.slots)
    ]  # fmt: skip
    if not anchors:
        return None

    def distance(value: Slot, anchor: Slot) -> int:
        return value.start - anchor.end if value.start >= anchor.end else anchor.start - value.end

    nearest = {a: min(values, key=lambda v, a=a: distance(v, a)) for a in anchors}
    mine_near = [a for a, v in nearest.items() if any(c is v for c in chosen)]
    if not mine_near:
        return "elsewhere"
    return "beside" if any(distance(v, a) <= _BESIDE for a in mine_near for v in chosen) else "near"
