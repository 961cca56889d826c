"""The slots editor, with the offline slots verifier and with verifier and gate doubles: the
contradicted span fixed at the claim's granularity, wording edits flagged unless enabled, an edit
kept only if the verdict improves, candidates from the verifier's mismatch first and names
replaced whole, and what a refusal by the gate leaves."""

from __future__ import annotations

import pytest

from middleware.evidence.request_passages import readable
from middleware.pipeline.verifiers import SlotsVerifier, passages_from_texts
from middleware.pipeline.verifiers.base import DetailedVerdict, Mismatch
from middleware.composition.editor import build_editor
from middleware.pipeline.editing import Editor
from middleware.revise.edits import apply_edits
from middleware.revise.editors import SlotsEditor
from middleware.settings import load_settings
from middleware.types import Passage, Revision


@pytest.fixture(scope="module")
def verifier() -> SlotsVerifier:
    return SlotsVerifier()


@pytest.fixture(scope="module")
def editor(verifier: SlotsVerifier) -> Editor:
    return build_editor(load_settings(), verifier, backend="slots")


FIXES = [
    (  # a bare year stays a bare year although the evidence gives the month
        "The Eiffel Tower was completed in 1899.",
        "The Eiffel Tower, designed by the company of Gustave Eiffel, was completed in March 1889 for the World's Fair.",
        "The Eiffel Tower was completed in 1889.",
    ),
    (  # the claim's granularity: only the year changes
        "The Great Fire of London began in September 1606.",
        "The Great Fire of London burned from 2 to 6 September 1666.",
        "The Great Fire of London began in September 1666.",
    ),
    (
        "The Treaty of Versailles was signed by Spain and the Allied Powers.",
        "The Treaty of Versailles was signed on 28 June 1919 by Germany and the Allied Powers.",
        "The Treaty of Versailles was signed by Germany and the Allied Powers.",
    ),
]


async def test_wording_edits_are_flagged_unless_enabled(verifier) -> None:
    """A negation or a verb is no value swap: flagged by default, fixed with pipeline.edit_wording."""
    sentence, fixed = "Marie Curie was not born in Warsaw.", "Marie Curie was born in Warsaw."
    passages = passages_from_texts(["Marie Curie was born in Warsaw in 1867."])
    verdict = await verifier.verify(sentence, passages)
    flagged = await build_editor(load_settings(), verifier, backend="slots").edit(sentence, verdict, passages)
    assert not flagged.changed and flagged.revision is not None and flagged.revision.status == "flagged"
    assert "wording" in flagged.revision.reason and flagged.revision.suggested == fixed
    settings = load_settings()
    settings.pipeline.edit_wording = True
    result = await build_editor(settings, verifier, backend="slots").edit(sentence, verdict, passages)
    assert result.text == fixed and result.revision is not None and result.revision.status == "applied"


@pytest.mark.parametrize(("sentence", "evidence", "fixed"), FIXES)
async def test_slots_editor_fixes_the_contradicted_span(verifier, editor, sentence, evidence, fixed) -> None:
    passages = passages_from_texts([evidence])
    verdict = await verifier.verify(sentence, passages)
    result = await editor.edit(sentence, verdict, passages)
    assert result.text == fixed, result.rejected
    text, edits = result  # unpacks as (text, edits) for the FactChecker
    assert text == fixed and apply_edits(sentence, edits) == fixed
    assert all(e.evidence_id == "0" and e.tag in ("entity", "relation") for e in result.edits)
    assert result.verdict is not None and result.verdict.label != "contradictory"


async def test_slots_editor_leaves_attributable_sentences(verifier, editor) -> None:
    sentence, passages = "Paris is the capital of France.", passages_from_texts(["Paris is the capital of France."])
    verdict = await verifier.verify(sentence, passages)
    assert verdict.label == "attributable"
    result = await editor.edit(sentence, verdict, passages)
    assert not result.changed and "attributable" in result.rejected


class RecordingVerifier:
    """A verifier double: ``judge(text) -> label``; records the texts it was asked about."""

    name = "recording"

    def __init__(self, judge) -> None:
        self.judge = judge
        self.seen: list[str] = []

    async def verify(self, claim, evidence, context=None) -> DetailedVerdict:
        self.seen.append(claim)
        label = self.judge(claim)
        return DetailedVerdict(label=label, scores={"attributable": 0.9 if label == "attributable" else 0.05})


SENTENCE = "The bridge opened in 1937 with a span of 1,280 metres."
PASSAGES = [Passage(id="p7", text="The bridge opened in 1937; its span is 1,820 metres.", provider="t", source="s")]


def _mismatch_verdict() -> DetailedVerdict:
    at = SENTENCE.index("1,280 metres")
    ev = PASSAGES[0].text.index("1,820 metres")
    mismatch = Mismatch(kind="quantity", span=(at, at + 12), text="1,280 metres", replacement="1,820 metres",
                        evidence_index=0, evidence_span=(ev, ev + 12))  # fmt: skip
    return DetailedVerdict(label="contradictory", mismatches=[mismatch], unsupported=[(at, at + 12)], evidence_index=0)


async def test_slots_editor_keeps_an_edit_only_if_the_verdict_improves() -> None:
    stubborn = RecordingVerifier(lambda text: "contradictory")
    result = await SlotsEditor(stubborn).edit(SENTENCE, _mismatch_verdict(), PASSAGES)
    assert not result.changed and result.rejected == "no candidate edit improved the verdict"
    assert any("1,820" in text for text in stubborn.seen)  # the candidate was re-verified

    convinced = RecordingVerifier(lambda text: "attributable" if "1,820 metres" in text else "contradictory")
    result = await SlotsEditor(convinced).edit(SENTENCE, _mismatch_verdict(), PASSAGES)
    assert result.text == SENTENCE.replace("1,280", "1,820")
    [edit] = result.edits
    assert (edit.original, edit.replacement, edit.evidence_id) == ("1,280", "1,820", "p7")  # minimal: the number
    assert result.evidence_index == 0 and result.verdict.label == "attributable"


MARCH = "Gandhi led the march in 1932."
MARCH_PASSAGES = [
    Passage(id="march", text="In 1930 Gandhi led the march to the sea.", provider="t", source="s"),
    Passage(id="plan", text="The march Gandhi led was planned in 1869.", provider="t", source="s"),
]


def _march_verdict() -> DetailedVerdict:
    at, ev = MARCH.index("1932"), MARCH_PASSAGES[0].text.index("1930")
    mismatch = Mismatch(kind="date", span=(at, at + 4), text="1932", replacement="1930", evidence_index=0,
                        evidence_span=(ev, ev + 4))  # fmt: skip
    return DetailedVerdict(label="contradictory", mismatches=[mismatch], unsupported=[(at, at + 4)], evidence_index=0)


async def test_slots_editor_tries_the_verifiers_mismatch_first() -> None:
    """A value from a sentence about another event (the planning) may re-verify better with a
    lenient verifier; the mismatch, from the sentence about the claim's event, goes first."""
    lenient = RecordingVerifier(lambda text: "attributable" if "1869" in text else "extrapolatory")
    editor = SlotsEditor(lenient)
    assert any("1869" in c.replacement for c in await editor.candidates(MARCH, _march_verdict(), MARCH_PASSAGES))
    result = await editor.edit(MARCH, _march_verdict(), MARCH_PASSAGES)
    assert result.text == "Gandhi led the march in 1930."


class RefusingGate:
    """A gate double that refuses every revision, naming its evidence sentence."""

    def __init__(self) -> None:
        self.reviewed: list[str] = []

    def enabled(self, rule: str) -> bool:
        return True

    async def review(self, result, evidence, context=None) -> Revision:  # noqa: ANN001
        self.reviewed.append(result.text)
        return Revision(status="flagged", reason=f"refused {result.text}", suggested=result.text,
                        evidence_sentence=result.edits[0].evidence)  # fmt: skip


async def test_a_refused_revision_is_reported_as_the_best_candidate_was() -> None:
    gate = RefusingGate()
    lenient = RecordingVerifier(lambda text: "attributable" if "1869" in text or "1930" in text else "contradictory")
    result = await SlotsEditor(lenient, gate=gate).edit(MARCH, _march_verdict(), MARCH_PASSAGES)  # type: ignore[arg-type]
    assert not result.changed and len(gate.reviewed) >= 2  # the next try left the refused sentence out
    assert result.revision is not None and result.revision.suggested == "Gandhi led the march in 1930."


def _mismatch(sentence: str, evidence: str, old: str, new: str, kind: str) -> DetailedVerdict:
    at, ev = sentence.index(old), evidence.index(new)
    mismatch = Mismatch(kind=kind, span=(at, at + len(old)), text=old, replacement=new, evidence_index=0,
                        evidence_span=(ev, ev + len(new)))  # fmt: skip
    return DetailedVerdict(label="contradictory", mismatches=[mismatch], unsupported=[(at, at + len(old))])


async def test_a_name_with_a_number_is_replaced_whole() -> None:
    """'Gemini 12' -> 'Gemini 8': the name's number alone is never touched, the whole name is."""
    sentence = "As command pilot of Gemini 12 in March 1966, Armstrong docked two spacecraft."
    evidence = "As command pilot of Gemini 8 in March 1966 he docked two spacecraft."
    verdict = _mismatch(sentence, evidence, "Gemini 12", "Gemini 8", "entity")
    found = await SlotsEditor(RecordingVerifier(lambda text: "attributable")).candidates(
        sentence, verdict, [Passage(id="g", text=evidence, provider="t", source="s")]
    )
    changes = {(sentence[c.start : c.end], c.replacement) for c in found if c.source == "mismatch"}
    assert ("Gemini 12", "Gemini 8") in changes and ("12", "8") not in changes


async def test_a_count_after_a_name_may_be_replaced() -> None:
    sentence = "During her flight Valentina Tereshkova orbited the Earth 17 times."
    evidence = "During a flight of almost three days she orbited the Earth 48 times."
    found = await SlotsEditor(RecordingVerifier(lambda text: "attributable")).candidates(
        sentence, _mismatch(sentence, evidence, "17", "48", "number"), [Passage(id="v", text=evidence, provider="t", source="s")]
    )
    assert ("17", "48") in {(sentence[c.start : c.end], c.replacement) for c in found}
    apollo = "Apollo 11 landed on the Moon in 1969."
    found = await SlotsEditor(RecordingVerifier(lambda text: "attributable")).candidates(
        apollo, _mismatch(apollo, "Apollo 12 landed on the Moon in 1969.", "11", "12", "number"),
        [Passage(id="a", text="Apollo 12 landed on the Moon in 1969.", provider="t", source="s")],
    )  # fmt: skip
    assert not [c for c in found if apollo[c.start : c.end] == "11"]  # the number of a name


class CountingVerifier:
    """The slots verifier, counting its calls by the evidence it was given."""

    name = "counting"

    def __init__(self) -> None:
        self.inner = SlotsVerifier()
        self.evidence_seen: list[str] = []

    async def verify(self, claim, evidence, context=None) -> DetailedVerdict:  # noqa: ANN001
        self.evidence_seen.append(" ".join(p.text for p in evidence))
        return await self.inner.verify(claim, evidence, context)


class OnlyGate:
    """A gate double that applies only revisions from the sentence ``accepted``."""

    def __init__(self, accepted: str) -> None:
        self.accepted = accepted
        self.reviewed: list[str | None] = []

    def enabled(self, rule: str) -> bool:
        return True

    async def review(self, result, evidence, context=None) -> Revision:  # noqa: ANN001
        grounding = result.edits[0].evidence
        self.reviewed.append(grounding)
        status = "applied" if grounding == self.accepted else "flagged"
        return Revision(status=status, reason=status, suggested=result.text, evidence_sentence=grounding)


async def test_after_a_refusal_the_sentence_is_verified_without_the_refused_sentence() -> None:
    first = "Marie Curie received the 1911 Nobel Prize in Chemistry for the discovery of radium."
    second = "Marie Curie received the 1911 Nobel Prize in Chemistry alone."
    passages = passages_from_texts([f"{first} {second}"])
    claim = "Marie Curie received the 1915 Nobel Prize in Chemistry alone."
    verifier = CountingVerifier()
    verdict = await verifier.verify(claim, passages)
    refused = verdict.evidence_sentence
    assert verdict.label == "contradictory" and refused in (first, second)
    accepted = second if refused == first else first
    gate = OnlyGate(accepted)
    result = await SlotsEditor(verifier, gate=gate).edit(claim, verdict, passages)  # type: ignore[arg-type]
    assert gate.reviewed[0] == refused and gate.reviewed[-1] == accepted
    assert result.text == claim.replace("1915", "1911") and result.edits[0].evidence == accepted
    assert any(refused not in seen for seen in verifier.evidence_seen)  # verified again without it


async def test_another_evidence_sentence_may_only_corroborate_a_refused_correction() -> None:
    physics = "She shared the 1903 Nobel Prize in Physics, becoming the first woman to win a Nobel Prize."
    chemistry = "She received the 1911 Nobel Prize in Chemistry alone."
    claim = "She received a second Nobel Prize, in Chemistry, in 1915."
    refused_fix = claim.replace("1915", "1911")
    editor = SlotsEditor(SlotsVerifier())
    # without the Chemistry sentence the Physics one contradicts the claim too, with 1903: no
    passages = passages_from_texts([f"Marie Curie was a physicist. {physics} {chemistry}"])
    assert await editor._corroborated(claim, passages, None, {chemistry}, {refused_fix}) is None
    # another sentence that gives the same 1911: yes
    again = "Her second prize was the 1911 Nobel Prize in Chemistry, which she received alone."
    passages = passages_from_texts([f"{chemistry} {again}"])
    result = await editor._corroborated(claim, passages, None, {chemistry}, {refused_fix})
    assert result is not None and result.text == refused_fix and result.edits[0].evidence == again


async def test_a_name_the_ner_cut_short_is_replaced_whole() -> None:
    """The mismatch has 'Memorial' for 'Washington Monument': the candidates also put the
    evidence's whole name, 'Lincoln Memorial', in place of the claim's whole name."""
    sentence = "On 28 August 1963 King delivered his speech at the Washington Monument."
    evidence = "On 28 August 1963 he delivered his speech at the Lincoln Memorial during the March."
    verdict = _mismatch(sentence, evidence, "Washington Monument", "Memorial", "entity")
    found = await SlotsEditor(RecordingVerifier(lambda text: "attributable")).candidates(
        sentence, verdict, [Passage(id="k", text=evidence, provider="t", source="s")]
    )
    assert ("Washington Monument", "Lincoln Memorial") in {(sentence[c.start : c.end], c.replacement) for c in found}


BLAZE = readable(str({"name": "Blaze Pizza", "city": "Goleta",
                      "attributes": {"WiFi": "no", "OutdoorSeating": True, "RestaurantsTakeOut": True}}))  # fmt: skip


SHORT_MONDAY = readable(str({"name": "Bouchon", "city": "Santa Barbara", "hours": {
    "Monday": "17:30-23:0", **{d: "17:0-21:0" for d in ("Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")},
    "Sunday": "9:0-14:0"}}))  # fmt: skip


@pytest.mark.parametrize(("record", "sentence", "fixed", "swap"), [
    # RAGTruth train: "free Wi-Fi" against "WiFi: no" stayed as written in correct mode
    (BLAZE, "The restaurant has a cozy atmosphere with outdoor seating and free Wi-Fi.",
     "The restaurant has a cozy atmosphere with outdoor seating and no Wi-Fi.", ("free", "no")),
    (BLAZE, "The business offers free WiFi, takeout, and outdoor seating.", None, None),  # 'no' would deny the list
    (BLAZE, "The restaurant has outdoor seating but no Wi-Fi.", None, None),  # true: never touched
    # RAGTruth train: 'from Monday to Saturday from 17:00-21:00' against a Monday of 17:30-23:00 was
    # flagged, not fixed: the day, not the time, is what the record states otherwise
    (SHORT_MONDAY, "The restaurant operates from Monday to Saturday from 17:00-21:00 and on Sunday from 9:00-14:00.",
     "The restaurant operates from Tuesday to Saturday from 17:00-21:00 and on Sunday from 9:00-14:00.",
     ("Monday", "Tuesday")),
    (SHORT_MONDAY, "The restaurant is open from Tuesday to Saturday from 17:00-21:00.", None, None),  # true
])  # fmt: skip
async def test_a_records_own_value_replaces_the_one_a_sentence_gives_its_field(verifier, editor, record, sentence,
                                                                               fixed, swap) -> None:  # fmt: skip
    """A yes/no field's "no" for the "free" a sentence gives it; the end day of a day span
    the record gives other hours, moved one day in."""
    passages = passages_from_texts([record])
    verdict = await verifier.verify(sentence, passages)
    result = await editor.edit(sentence, verdict, passages)
    assert result.text == (fixed or sentence), result.rejected
    if fixed is not None:
        assert result.revision is not None and result.revision.status == "applied"
        assert [(e.original, e.replacement) for e in result.edits] == [swap]
