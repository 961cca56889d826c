"""Decontextualisation: with spaCy, pronouns and descriptions resolved from the earlier sentences
and the question, spans mapped back, and the question prepared once per request; with an LLM
against a loopback OpenAI-compatible server, only faithful rewrites accepted."""

from __future__ import annotations

import pytest

from adapters.chat_client import ChatClient
from middleware.pipeline.decontext import (
    SHARED_PARSE_CHARS,
    LLMDecontextualiser,
    SpacyDecontextualiser,
    prepare_question,
)
from middleware.pipeline.slots import _CACHE
from tests.support.pipeline_doubles import LoopbackChat


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


async def test_llm_decontext_accepts_faithful_rewrites_only() -> None:
    previous = ["Marie Curie was a physicist."]
    async with LoopbackChat(lambda messages, i: "Marie Curie was born in Warsaw in 1867.") as server:
        async with ChatClient(server.base_url) as client:
            good = await LLMDecontextualiser(client).decontextualise(
                "She was born in Warsaw in 1867.", previous
            )
    assert good.text == "Marie Curie was born in Warsaw in 1867."
    assert good.to_original((good.text.index("1867"), good.text.index("1867") + 4)) == (26, 30)
    async with LoopbackChat(lambda messages, i: "Marie Curie was a physicist.") as server:  # drops the facts
        async with ChatClient(server.base_url) as client:
            bad = await LLMDecontextualiser(client).decontextualise(
                "She was born in Warsaw in 1867.", previous
            )
    assert bad.text == "Marie Curie was born in Warsaw in 1867."  # the spaCy fallback
