"""Slot extraction, check-worthiness, decontextualisation and offline question generation."""

from __future__ import annotations

import pytest

from middleware.pipeline.checkworthy import assess, skipped_verdict
from middleware.pipeline.cqgen import SlotQuestionGenerator, dedupe
from middleware.pipeline.decontext import (
    SHARED_PARSE_CHARS,
    NoDecontextualiser,
    SpacyDecontextualiser,
    prepare_question,
)
from middleware.pipeline.slots import _CACHE, analyse, analyse_many, slots_agree
from middleware.pipeline.stages import generate_questions, prepare_claim
from middleware.types import CheckContext, Question


def _slots(text: str) -> list[tuple[str, str]]:
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
    assert _slots(text) == expected
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


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Marie Curie was born in Warsaw in 1867.", None),
        ("Certainly, the tower is 330 m tall.", None),
        ("What is the capital of France?", "question"),
        ("Hello!", "greeting"),
        ("Thanks for asking.", "greeting"),
        ("As an AI language model, I cannot browse the web.", "meta"),
        ("Here is a summary of her life:", "meta"),
        ("I hope this helps!", "meta"),
        ("Click the Save button.", "instruction"),
        ("Please make sure to restart your computer.", "instruction"),
        ("You should visit Paris in spring.", "instruction"),
        ("I think Paris is nice.", "hedged"),
        ("In my opinion the sequel was better.", "hedged"),
        ("Paris is a beautiful city.", "subjective"),
        ("The movie was great.", "subjective"),
        ("People should recycle more.", "subjective"),
        ("Einstein was a brilliant physicist who won the Nobel Prize in 1921.", None),
        ("...", "empty"),
    ],
)
def test_checkworthiness(text: str, reason: str | None) -> None:
    worthiness = assess(text)
    assert worthiness.reason == reason
    assert worthiness.checkworthy is (reason is None)
    if reason:
        verdict = skipped_verdict(worthiness)
        assert verdict.label == "skipped" and verdict.reason == reason


@pytest.mark.parametrize(
    ("sentence", "previous", "question", "expected"),
    [
        ("He moved to Paris in 1891.", ["Marie Curie was a physicist."], None, "Marie Curie moved to Paris in 1891."),
        ("It is 330 metres tall.", ["The Eiffel Tower is in Paris."], None, "The Eiffel Tower is 330 metres tall."),
        ("The company was founded in 1976.", ["Apple makes iPhones."], None, "Apple was founded in 1976."),
        ("The city has 2 million inhabitants.", ["Paris is the capital of France."], None, "Paris has 2 million inhabitants."),
        ("Its population is about 2 million.", [], "Tell me about Paris.", "Paris's population is about 2 million."),
        ("His first company failed.", ["Steve Jobs was a businessman."], None, "Steve Jobs's first company failed."),
        ("They released their first album in 1963.", ["The Beatles were a band."], None,
         "The Beatles released the Beatles' first album in 1963."),
        ("Marie Curie said she was tired.", ["Irène was her daughter."], None, "Marie Curie said she was tired."),
        ("It is important to note the date.", ["The Eiffel Tower is in Paris."], None, "It is important to note the date."),
        ("He moved to Paris.", [], None, "He moved to Paris."),
    ],
)  # fmt: skip
def test_spacy_decontextualisation(
    sentence: str, previous: list[str], question: str | None, expected: str
) -> None:
    assert SpacyDecontextualiser().resolve(sentence, previous, question).text == expected


def test_decontext_maps_spans_back() -> None:
    result = SpacyDecontextualiser().resolve("He was born in 1868.", ["Marie Curie was a physicist."])
    assert result.text == "Marie Curie was born in 1868."
    year = result.text.index("1868")
    assert result.to_original((year, year + 4)) == (15, 19)
    assert result.to_original((0, 11)) == (0, 2)  # the replaced pronoun


@pytest.mark.parametrize(
    ("claim", "questions"),
    [
        ("Marie Curie was born in Warsaw on 7 November 1867.", [
            "Who was born in Warsaw on 7 November 1867?", "Where was Marie Curie born on 7 November 1867?",
            "When was Marie Curie born in Warsaw?"]),
        ("The Eiffel Tower is 330 metres tall and was completed in 1889.", [
            "What is 330 metres tall?", "How tall is the Eiffel Tower?", "When was the Eiffel Tower completed?"]),
        ("Steve Jobs founded Apple.", ["Who founded Apple?", "What did Steve Jobs found?"]),
        ("It has twelve floors and cost $1,200.", ["How many floors does it have?", "How much did it cost?"]),
        ("Marie Curie discovered polonium.", ["Who discovered polonium?", "Did Marie Curie discover polonium?"]),
        ("The Cretaceous ended.", ["What ended?", "Did the Cretaceous end?"]),
    ],
)  # fmt: skip
def test_slot_questions(claim: str, questions: list[str]) -> None:
    generated = SlotQuestionGenerator().questions(claim)
    assert [q.text for q in generated] == questions
    for q in generated:
        assert q.slot is not None and q.span is not None and claim[q.span[0] : q.span[1]] == q.slot


def test_slot_questions_fall_back_to_the_claim() -> None:
    assert [q.text for q in SlotQuestionGenerator().questions("It rained.")] == ["Did it rain?"]
    assert [q.text for q in SlotQuestionGenerator().questions("It was cold.")] == ["It was cold."]


def test_dedupe_questions() -> None:
    questions = [
        Question(text="When was Curie born?"),
        Question(text="when was Curie born"),
        Question(text="Who?"),
    ]
    assert [q.text for q in dedupe(questions)] == ["When was Curie born?", "Who?"]


async def test_stages_time_and_map_back() -> None:
    timings: dict[str, float] = {}
    context = CheckContext(previous=["Marie Curie was a physicist."])
    claim = await prepare_claim("She was born in Warsaw.", context, SpacyDecontextualiser(), timings)
    assert claim.text == "Marie Curie was born in Warsaw." and claim.worthiness.checkworthy
    questions = await generate_questions(SlotQuestionGenerator(), claim, timings=timings)
    where = next(q for q in questions if q.slot == "Warsaw")
    assert claim.sentence[where.span[0] : where.span[1]] == "Warsaw"
    assert set(timings) == {"claims", "questions"}
    skipped = await prepare_claim("Hello there!", context, NoDecontextualiser())
    assert not skipped.worthiness.checkworthy and skipped.text == "Hello there!"


def test_a_prepared_question_rewrites_as_the_question_itself() -> None:
    """The question read once per request (a prompt of pasted documents, longer than the
    shared parse cache takes) gives every sentence the rewrite the raw question gives."""
    documents = " ".join(["The Eiffel Tower is in Paris. The Beatles were a band from Liverpool."] * 40)
    prompt = f"{documents}\n\nTell me about Marie Curie."
    assert len(prompt) > SHARED_PARSE_CHARS
    prepared = prepare_question(prompt)
    assert prompt not in _CACHE  # a long prompt's parse is not kept in the shared cache
    decontext = SpacyDecontextualiser()
    for sentence, previous in (("She won two Nobel Prizes.", []), ("They released an album.", []),
                               ("It is 330 metres tall.", ["Paris is in France."])):
        assert decontext.resolve(sentence, previous, prepared) == decontext.resolve(sentence, previous, prompt)
    assert decontext.resolve("She won two Nobel Prizes.", [], prepared).text == "Marie Curie won two Nobel Prizes."
    assert prepare_question("").referents == ()
