"""Slot extraction (``middleware.pipeline.slots``): the slots of each kind with their spans, the
relation and negation, agreement across types and the parse cache; ages, durations and month
names inside proper names; names and the roles they play; the parse batcher."""

from __future__ import annotations

import asyncio

import pytest

from middleware.text.nlp import get_nlp
from middleware.pipeline import slots
from middleware.pipeline.names import normalise_name
from middleware.pipeline.slots import (
    Analysis,
    Role,
    Slot,
    analyse,
    analyse_async,
    analyse_many,
    participants,
    slots_agree,
)


def _slots(text: str) -> dict[str, str]:
    return {s.text: s.group for s in analyse(text).slots}


@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("Elvis Presley died at Graceland on 16 August 1977, aged 45.", "45"),
        ("In 1963, at the age of 21, he was diagnosed with motor neurone disease.", "21"),
    ],
)
def test_an_age_is_a_slot_on_its_number(text: str, age: str) -> None:
    assert _slots(text)[age] == "quantity:age"


def test_ages_compare_by_value() -> None:
    (a,) = [s for s in analyse("Presley died in 1977, aged 45.").slots if s.group == "quantity:age"]
    (b,) = [s for s in analyse("Presley died in 1977, aged 42.").slots if s.group == "quantity:age"]
    (c,) = [s for s in analyse("He died in 1977, aged 42.").slots if s.group == "quantity:age"]
    assert slots_agree(a, b) is False and slots_agree(b, c) is True


def test_a_duration_tagged_time_is_a_slot() -> None:
    assert _slots("Wilbur flew 852 feet in 59 seconds.")["59 seconds"] == "quantity:time"


def test_a_clock_time_is_no_slot() -> None:
    assert not [s for s in analyse("The meeting started at 10:30 pm.").slots if s.label == "TIME"]


def test_a_month_that_ends_a_name_is_part_of_the_name() -> None:
    slots = _slots("Mahatma Gandhi led the Salt March in 1932.")
    assert "March" not in slots and "Salt March" in slots and slots["1932"] == "date"
    assert _slots("He was born on 5 March.")["5 March"] == "date"
    assert _slots("He arrived in March.")["March"] == "date"


def _name(text: str, label: str) -> Slot:
    return Slot("entity", label, text, 0, len(text), normalise_name(text), Role("pobj", "of", "pilot", "fly"))


def test_names_of_one_series_compare_whatever_their_labels() -> None:
    """The NER labels 'Gemini 12' ORG in one sentence and 'Gemini 8' WORK_OF_ART in another."""
    assert slots_agree(_name("Gemini 12", "ORG"), _name("Gemini 8", "WORK_OF_ART")) is False
    assert slots_agree(_name("Wake Island", "LOC"), _name("Howland Island", "ORG")) is False
    assert slots_agree(_name("Gemini 12", "ORG"), _name("Apollo 11", "WORK_OF_ART")) is None


def test_a_name_in_apposition_to_a_noun_plays_the_nouns_role() -> None:
    [braque] = [s for s in analyse("With the French painter Georges Braque he developed Cubism.").slots
                if s.text == "Georges Braque"]  # fmt: skip
    assert (braque.role.prep, braque.role.verb) == ("with", "develop")


def test_a_pronoun_after_a_named_subject_is_not_the_passage_topic() -> None:
    fide = analyse("The world chess federation, FIDE, was founded in Paris in 1924, and it took control of the title.")
    assert not [p for p in participants(fide, "World Chess Championship", frozenset({"it"})) if p.slot is None]
    plain = analyse("In 1948 it took control of the title.")
    [topic] = [p for p in participants(plain, "FIDE", frozenset({"it"})) if p.slot is None]
    assert (topic.verb, topic.role, topic.name) == ("take", "agent", "FIDE")


def test_a_regnal_number_stays_with_the_name() -> None:
    # the parse takes 'I' for a pronoun; the name the NER missed keeps it, in the name's role
    analysis = analyse("Leonardo spent his last years in France at the invitation of King Francis I and died at Amboise.")
    names = {s.text: s for s in analysis.slots if s.kind == "entity"}
    assert "King Francis I" in names
    assert names["King Francis I"].role.prep == "of"
    assert [s.text for s in analyse("Then I went to Rome.").slots] == ["Rome"]


def test_a_title_the_ner_left_out_joins_the_name() -> None:
    analysis = analyse('King Alfonso XIII granted the club the title "Real" in 1920.')
    assert [s.text for s in analysis.slots if s.kind == "entity"][0] == "King Alfonso XIII"


def test_the_subject_of_the_clause_a_name_sits_in() -> None:
    from middleware.pipeline.slots import clause_subject

    analysis = analyse("Isaac Newton studied and taught at Trinity College, and Charles Darwin studied at Christ's College.")
    by_text = {s.text: s for s in analysis.slots}
    subject = clause_subject(analysis, by_text["Trinity College"])
    assert subject is not None and subject.text == "Isaac Newton"  # of 'taught', conjoined to 'studied'
    subject = clause_subject(analysis, by_text["Christ's College"])
    assert subject is not None and subject.text == "Charles Darwin"
    assert clause_subject(analysis, by_text["Charles Darwin"]) is None  # a subject has none but itself


def test_the_subject_of_a_passive_with_an_object_receives_it() -> None:
    analysis = analyse("Bohr was awarded the medal by the Royal Society.")
    roles = {p.name: p.role for p in participants(analysis)}
    assert roles["Bohr"] == "to"


def _parsed(analysis: Analysis) -> list[tuple[str, str, str, int, str]]:
    return [(t.text, t.tag_, t.dep_, t.head.i, t.ent_type_) for t in analysis.doc]


async def test_the_parse_batcher_parses_concurrent_texts_together_as_nlp_would() -> None:
    texts = [f"Ada Lovelace wrote {n} notes on the Analytical Engine in London." for n in range(1901, 1907)]
    batches: list[int] = []
    parser = slots._parser()
    real = parser.run_batch
    parser.run_batch = lambda items: batches.append(len(items)) or real(items)
    try:
        got = await asyncio.gather(*(analyse_async([t]) for t in texts))
    finally:
        parser.run_batch = real
    assert sum(batches) == len(texts) and len(batches) < len(texts)  # batched, each text parsed once
    for [analysis], text in zip(got, texts, strict=True):
        assert analysis.text == text
        assert _parsed(analysis) == _parsed(slots.analysis_of(get_nlp()(text)))
        assert analysis.slots == slots.analysis_of(get_nlp()(text)).slots
        assert analyse(text) is analysis  # cached for the synchronous callers


async def test_analyse_async_answers_cached_texts_without_parsing() -> None:
    text = "Grace Hopper joined the Navy reserve in 1943."
    cached = analyse(text)
    parser = slots._parser()
    real = parser.run_batch
    parser.run_batch = lambda items: pytest.fail(f"parsed {items}")
    try:
        assert await analyse_async([text, text]) == [cached, cached]
    finally:
        parser.run_batch = real


def _kinds_and_texts(text: str) -> list[tuple[str, str]]:
    return [(s.kind, s.text) for s in analyse(text).slots]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Marie Curie was born in Warsaw on 7 November 1867.",
            [("entity", "Marie Curie"), ("entity", "Warsaw"), ("date", "7 November 1867")],
        ),
        ("Mount Everest is 8,849 m high.", [("entity", "Mount Everest"), ("quantity", "8,849 m")]),
        ("The temperature reached 45 °C in July 2019.", [("quantity", "45 °C"), ("date", "July 2019")]),
        ("It has twelve floors and cost $1,200.", [("number", "twelve"), ("quantity", "$1,200")]),
        (
            "Einstein did not win the Nobel Prize in 1925.",
            [("entity", "Einstein"), ("entity", "Nobel Prize"), ("date", "1925")],
        ),
        ("She lived in Berlin for twelve years.", [("entity", "Berlin"), ("quantity", "twelve years")]),
    ],
)
def test_slot_extraction(text: str, expected: list[tuple[str, str]]) -> None:
    assert _kinds_and_texts(text) == expected
    for slot in analyse(text).slots:
        assert text[slot.start : slot.end] == slot.text


def test_relations_and_negation() -> None:
    assert analyse("Obama never visited Iran.").negated
    assert analyse("Einstein did not win the prize.").relation.lemma == "win"
    assert not analyse("Obama visited Iran.").negated
    born = analyse("Marie Curie was born in Warsaw.")
    assert born.relation.lemma == "bear" and born.relation.prep == "in"
    assert born.slots[1].role.prep == "in" and born.slots[1].role.head == "bear"


def test_slots_agree_across_types() -> None:
    claim = analyse("The tower was completed in 1889.").slots[-1]
    evidence = analyse("Completion year: 1889 (the tower).")
    assert any(slots_agree(claim, e) for e in evidence.slots)


def test_analyse_many_uses_the_cache() -> None:
    texts = ["Paris is in France.", "Rome is in Italy.", "Paris is in France."]
    first = analyse_many(texts)
    assert first[0] is first[2] and analyse("Rome is in Italy.") is first[1]
