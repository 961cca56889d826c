"""The edit gate's rules by name, in one place (``GATE_RULES``), and those of them that read
a revision's form without a model.

Each rule refuses a revision for one reason and is a function with one signature for its
stage: ``ChangeRule`` reads one change against its evidence sentence, ``ProposalRule`` the
whole revision against its evidence passage; the re-verification rules (``gate.py``) and
``swapped_roles`` (``guards.py``) are registered here too. ``pipeline.rules.gate_disabled``
switches rules off by these names (``checked_names``); a refused revision records the rule
that refused it (``Revision.rule``). Rules run in the order of ``GATE_RULES``: the first
that refuses is the one reported.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

from middleware.evidence.lexical import term_recall, terms
from middleware.pipeline.lexicon import PRONOUNS
from middleware.pipeline.names import mentions, normalise_name
from middleware.pipeline.slots import Slot, analyse, named_subject
from middleware.pipeline.verifiers.fields import swaps_field
from middleware.pipeline.verifiers.hours import is_time_of_day
from middleware.pipeline.editing import EditResult
from middleware.revise.values import (
    claim_slot,
    era,
    is_same_kind,
    is_singular_before_plural,
    is_whole_value,
    name_run,
    value_problem,
    whole_name,
    word_set,
)
from middleware.types import Edit, Passage

GATE_RULES: dict[str, str] = {
    "swapped_roles": "participants the verifier finds in each other's roles are flagged, never rewritten: no "
    "single value swap fixes who did what",
    "one_evidence_sentence": "every change names one and the same evidence sentence (off: the first one named "
    "grounds the review; a revision that names none has nothing to be re-verified against and is still refused)",
    "values_only": "a change swaps a number, date or name, not other wording such as a verb or a negation "
    "(a record's yes/no field value it states is a value: 'free Wi-Fi' -> 'no Wi-Fi' against 'WiFi: no'; "
    "pipeline.edit_wording switches it off too)",
    "pronoun_for_name": "no pronoun put in place of a name",
    "words_for_figure": "no words put in place of a figure",
    "same_era": "a value keeps its era (BC / AD, written in it or right after it)",
    "name_already_in_sentence": "no name put in that the rest of the sentence already has",
    "name_in_another_role": "no name replaced that the evidence sentence also names: a swapped role, not a "
    "wrong name",
    "name_as_written": "the resulting name is one the evidence sentence writes, whole",
    "whole_value": "the replacement is a whole number, date or name of the evidence sentence, not a phrase cut "
    "from something else",
    "same_kind": "the replacement is a value of the same kind (a figure of the same dimension, a date, a name "
    "of the same type)",
    "value_of_the_role": "the replacement is the evidence's value for the claim's role (a shared name right by "
    "it, else the verbs); it also keeps such candidates out of the slots editor",
    "name_twice": "the edited sentence names no name twice",
    "singular_before_plural": "no 'one' put before a plural noun",
    "about_the_claim": "the evidence sentence, under its passage title, states at least 0.3 of the sentence's "
    "unchanged content words (a record's line: the sentence gives its field the wrong value)",
    "subject_named": "a titled evidence passage names the sentence's subject (where the edit keeps it): a value "
    "from a passage about another thing is not put in",
    "name_stated_elsewhere": "no name (a figure is none) replaced that the evidence passage states itself: the claim may have the "
    "wrong verb, not the wrong name (a record's field value swap is checked by the field)",
    "contradicts_original": "the evidence sentence contradicts the original (the verifier on that sentence "
    "alone, or every change swaps in a disagreeing value of its type)",
    "edit_not_contradicted": "the verifier finds no contradiction between the evidence sentence and the edit",
    "edit_supported": "the verifier's P(attributable) of the edit (the sentence, or the clause the edit changes) "
    "reaches the combiner's edit threshold (its decision threshold for a clean swap the slots verifier finds "
    "wholly stated; a record's own value put in place of one the data states otherwise is checked by the field, "
    "not the model)",
    "slots_stated": "without an NLI model: the evidence sentence states every slot of the edit (a record's field "
    "value swap: checked by the field)",
    "entails_edit": "the NLI model's P(entailment) of the edit (the sentence or the clause the edit changes), best "
    "reading, reaches min_entailment (a clean swap the slots verifier finds wholly stated: grounded_entailment; a "
    "record's field value swap: checked by the field)",
    "context_consistent": "the answer did not already state the value the edit replaces, or the edit does not "
    "contradict what it said",
}
"""The gate's rules by name, in the order they are applied."""


def checked_names(disabled: Iterable[str]) -> frozenset[str]:
    """``disabled`` as a set of gate rule names; raises on a name that is no gate rule."""
    names = frozenset(disabled)
    unknown = names - set(GATE_RULES)
    if unknown:
        raise ValueError(f"unknown edit gate rule(s) {sorted(unknown)}; the rules are {sorted(GATE_RULES)}")
    return names


@dataclass(frozen=True)
class Refusal:
    """Why a revision is refused: the rule's name and the reason as the user reads it."""

    rule: str
    reason: str


T = TypeVar("T")


# -- one change against its evidence sentence ------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One change of a revision, read against the evidence sentence it comes from."""

    sentence: str  # the original sentence
    edited: str  # the sentence with every change of the revision made
    edit: Edit
    evidence: str  # the evidence sentence

    @property
    def old(self) -> str:
        return self.edit.original

    @property
    def new(self) -> str:
        return self.edit.replacement

    def old_slots(self) -> tuple[Slot, ...]:
        return tuple(analyse(self.old).slots) if self.old.strip() else ()

    def new_slots(self) -> tuple[Slot, ...]:
        return tuple(analyse(self.new).slots) if self.new.strip() else ()

    def brings_name(self) -> bool:
        """The replacement is a name (capitalised, or an entity)."""
        return self.new[:1].isupper() or any(s.kind == "entity" for s in self.new_slots())


ChangeRule = Callable[[Change], str | None]


def values_only(change: Change) -> str | None:
    """A time of day is a value too ("10pm" -> "8pm"): the parser reads no slot in it; so is
    a record's yes/no field value the record states ("free Wi-Fi" -> "no Wi-Fi" against
    "WiFi: no", ``fields.swaps_field``)."""
    old, new, sentence = change.old, change.new, change.sentence
    names = old.strip()[:1].isupper() and new.strip()[:1].isupper() and old.strip() != sentence.strip()[: len(old.strip())]
    if change.old_slots() or names or (is_time_of_day(old) and is_time_of_day(new)):
        return None
    if swaps_field(sentence, [(change.edit.start, change.edit.end, new)], change.evidence):
        return None
    return f"'{old}' -> '{new}' changes wording, not a number, date or name: flagged, not rewritten"


def pronoun_for_name(change: Change) -> str | None:
    if word_set(change.new) & PRONOUNS - word_set(change.old):
        return f"'{change.old}' -> '{change.new}' would put a pronoun in place of a name"
    return None


def words_for_figure(change: Change) -> str | None:
    if re.search(r"\d", change.old) and not re.search(r"\d", change.new):
        return f"'{change.old}' -> '{change.new}' would put words in place of a figure"
    return None


def same_era(change: Change) -> str | None:
    new, edit = change.new.strip(), change.edit
    at = change.evidence.find(new)
    if at >= 0 and era(change.sentence, edit.start, edit.end) != era(change.evidence, at, at + len(new)):
        return f"'{change.old.strip()}' -> '{new}' would change the era (BC / AD)"
    return None


def name_already_in_sentence(change: Change) -> str | None:
    if not change.brings_name():
        return None
    sentence, edit, new = change.sentence, change.edit, change.new.strip()
    rest = sentence[: edit.start] + " " + sentence[edit.end :]
    if new and new.lower() in rest.lower():
        return f"the sentence already names '{new}': swapping it in would name it twice"
    return None


def name_in_another_role(change: Change) -> str | None:
    if not change.brings_name():
        return None
    old_slots = change.old_slots()
    if old_slots[:1] and old_slots[0].kind == "entity" and mentions(change.evidence, whole_name(change.sentence, change.edit)):
        return f"the evidence names '{change.old.strip()}' too: a swapped role, not a wrong name"
    return None


def name_as_written(change: Change) -> str | None:
    if not change.brings_name():
        return None
    edited, new, evidence = change.edited, change.new, change.evidence
    run = name_run(edited, edited.find(new) if new in edited else -1, len(new))
    if run and run not in evidence:
        return f"the evidence does not name '{run}'"
    stated = name_run(evidence, evidence.find(new.strip()), len(new.strip()))
    shortened = stated.endswith(run) and len(change.old.split()) == 1  # a surname for a surname: 'Einstein'
    if run and stated and stated != run and run in stated and not shortened:
        return f"the evidence names '{stated}', the edit would write '{run}'"
    return None


def _holders(change: Change, whole: bool) -> list[Slot] | None:
    """The evidence sentence's slots that hold the replacement (as a whole value, or at all);
    None where no value of the claim is replaced (a wording edit)."""
    new = change.new.strip()
    if claim_slot(change.sentence, change.edit) is None or not new:
        return None
    slots = analyse(change.evidence).slots
    if whole:
        return [s for s in slots if is_whole_value(new, s, change.old.strip())]
    return [s for s in slots if new in s.text]


def whole_value(change: Change) -> str | None:
    """Not a phrase cut from something else: 'NLP' -> 'Meme Status Submission Type', a
    heading of an unrelated page."""
    holders = _holders(change, whole=True)
    if holders is not None and not holders:
        return f"the evidence sentence states '{change.new.strip()}' as no number, date or name: not a value to swap in"
    return None


def same_kind(change: Change) -> str | None:
    """A number for a number, a date for a date, a name for a name of the same type (a person
    for a person; a proper noun the NER left unlabelled matches any name). Read on the
    evidence's whole values holding the replacement, or (``whole_value`` off) any holding it."""
    mine = claim_slot(change.sentence, change.edit)
    holders = _holders(change, whole=True) or _holders(change, whole=False)
    if mine is None or not holders or any(is_same_kind(mine, theirs) for theirs in holders):
        return None
    return f"'{change.old.strip()}' -> '{change.new.strip()}' would put a {holders[0].group} in place of a {mine.group}"


def value_of_the_role(change: Change) -> str | None:
    return value_problem(change.old, change.sentence, change.new, change.evidence)


def name_twice(change: Change) -> str | None:
    new = change.new.strip()
    if new[:1].isupper() and change.edited.count(new) > max(1, change.sentence.count(new)):
        return f"the edited sentence would name '{new}' twice"
    return None


def singular_before_plural(change: Change) -> str | None:
    if is_singular_before_plural(change.edited, change.new):
        return f"'{change.new}' would stand before a plural noun"
    return None


CHANGE_RULES: dict[str, ChangeRule] = {
    "values_only": values_only,
    "pronoun_for_name": pronoun_for_name,
    "words_for_figure": words_for_figure,
    "same_era": same_era,
    "name_already_in_sentence": name_already_in_sentence,
    "name_in_another_role": name_in_another_role,
    "name_as_written": name_as_written,
    "whole_value": whole_value,
    "same_kind": same_kind,
    "value_of_the_role": value_of_the_role,
    "name_twice": name_twice,
    "singular_before_plural": singular_before_plural,
}
"""The rules each change of a revision passes, in order."""


def first_refusal(rules: Mapping[str, Callable[[T], str | None]], subject: T, disabled: frozenset[str]) -> Refusal | None:
    """The first of ``rules`` not in ``disabled`` that refuses ``subject``."""
    for name, rule in rules.items():
        if name not in disabled and (reason := rule(subject)) is not None:
            return Refusal(name, reason)
    return None


def form_refusal(result: EditResult, evidence_sentence: str, disabled: frozenset[str] = frozenset()) -> Refusal | None:
    """The first refusal of a change rule, change by change."""
    for edit in result.edits:
        if (refusal := first_refusal(CHANGE_RULES, Change(result.original, result.text, edit, evidence_sentence),
                                     disabled)) is not None:  # fmt: skip
            return refusal
    return None


# -- the whole revision against its evidence passage ---------------------------------------


@dataclass(frozen=True)
class Proposal:
    """A revision with the one evidence sentence it comes from and that sentence's passage."""

    result: EditResult
    grounding: str  # the evidence sentence
    passage: Passage | None

    @property
    def title(self) -> str | None:
        return self.passage.title if self.passage is not None else None

    @cached_property
    def field_swap(self) -> bool:
        """The revision puts a record's own value in place of one the data states otherwise:
        a number no field holds, an opening time (``fields.swaps_field``); read once, the
        re-verification rules read it too (``gate.Recheck.field_swap``)."""
        return field_swap(self.result, self.grounding)


def field_swap(result: EditResult, grounding: str) -> bool:
    """``fields.swaps_field`` for a revision and its evidence sentence."""
    return swaps_field(result.original, [(e.start, e.end, e.replacement) for e in result.edits], grounding)


ProposalRule = Callable[[Proposal], str | None]

MIN_SHARED = 0.3
"""Share of the claim's unchanged content words its evidence sentence (under its passage
title) must state. Every edit of the planted benchmark's 150 shares at least 0.47 (a
two-clause sentence whose evidence sentence holds one clause); a value taken from an
unrelated sentence shares next to none ('began work on the Last Supper in 1490' and 'The
UN, over 2008, conducted a study')."""


def speaks_of_the_claim(result: EditResult, evidence: str, title: str | None = None) -> bool:
    """The evidence sentence speaks of what the claim speaks of: it (with its passage's
    title) states at least ``MIN_SHARED`` of the claim's content words outside the changed
    spans. A check on the words, whatever verifier or editor proposed the edit."""
    kept = list(result.original)
    for edit in result.edits:
        kept[edit.start : edit.end] = " " * (edit.end - edit.start)
    claim_terms = terms("".join(kept))
    return not claim_terms or shares_enough(claim_terms, evidence, title)


def shares_enough(claim_terms: tuple[str, ...], text: str, title: str | None) -> bool:
    """``text``, read under its passage title, states at least ``MIN_SHARED`` of the claim's terms."""
    return term_recall(claim_terms, terms(under_title(text, title))) >= MIN_SHARED


def under_title(text: str, title: str | None) -> str:
    """The text under its passage's title, where it does not name it already."""
    return f"{title}. {text}" if title and title not in text else text


def about_the_claim(proposal: Proposal) -> str | None:
    """A record's line is about the sentence where the sentence gives its field the wrong
    value (``field_swap``): a record shares few words with a sentence about it."""
    if proposal.field_swap or speaks_of_the_claim(proposal.result, proposal.grounding, proposal.title):
        return None
    return "the evidence sentence is not about what the sentence says: it shares too few of its other words"


def subject_named(proposal: Proposal) -> str | None:
    """The sentence's named subject, where the edit keeps it and the evidence passage, which
    has a title (so what it is about is known), names it nowhere: 'Its surface lies about 28
    metres below sea level' under 'Caspian Sea' shares most words of 'Machu Picchu lies
    about 3,430 metres above sea level' but is about another place, and an NLI model may
    still find it entails the edited sentence. A passage without a title may be about the
    subject under a pronoun ('It freezes at ...'), so it is not judged here."""
    title, result = proposal.title, proposal.result
    subject = named_subject(analyse(result.original))
    if title is None or subject is None:
        return None
    if any(subject.start < edit.end and edit.start < subject.end for edit in result.edits):
        return None
    text = proposal.passage.text if proposal.passage is not None else proposal.grounding
    if mentions(under_title(text, title), subject.text):
        return None
    return f"the evidence passage ({title}) never names '{subject.text}': it is about something else"


def name_stated_elsewhere(proposal: Proposal) -> str | None:
    """A name the edit replaces that the evidence passage states itself: 'Roger Bannister was
    born in Oxford' against a passage where he was born in Harrow and died in Oxford is as
    likely a wrong verb as a wrong place, so 'Harrow' is no safe fix. A figure is no name,
    even capitalised at the start of a sentence: 'Four alleged attackers were killed' against
    'against four militants who crossed ... Three of the alleged attackers were killed' was
    refused as if 'Four' named something (RAGTruth train); a count of one event stated for
    another is the common case, and the re-verification rules judge the fixed figure. A
    record's field value swap (``field_swap``) is the field's: the parser read "free" of
    "free Wi-Fi" as a name that a review of the record also wrote (RAGTruth train)."""
    if proposal.passage is None or proposal.field_swap:
        return None
    text = f" {normalise_name(proposal.passage.text)} "
    for edit in proposal.result.edits:
        old = edit.original.strip()
        slots = analyse(old)
        is_name = bool(slots.of_kind("entity")) or (old[:1].isupper() and not slots.of_kind("number", "quantity", "date"))
        if is_name and (name := normalise_name(old)) and f" {name} " in text:
            return f"the evidence names '{old}' for something else: the claim may have the wrong verb, not the wrong name"
    return None


PROPOSAL_RULES: dict[str, ProposalRule] = {
    "about_the_claim": about_the_claim,
    "subject_named": subject_named,
    "name_stated_elsewhere": name_stated_elsewhere,
}
"""The rules the whole revision passes after its changes, in order."""
