"""Question generation: the offline generator's questions from a claim's slots, de-duplication,
and the LLM generator (CQGen) against a loopback OpenAI-compatible server."""

from __future__ import annotations

import pytest

from adapters.chat_client import ChatClient
from middleware.pipeline.cqgen import LLMQuestionGenerator, SlotQuestionGenerator, dedupe
from middleware.types import Question
from tests.middleware.pipeline.verifiers.test_llm_verifier import _user
from tests.support.pipeline_doubles import LoopbackChat, fenced


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


async def test_llm_cqgen_unites_three_samples() -> None:
    samples = [
        " When was Marie Curie born?\n2. I googled: Where was Marie Curie born?",
        " when was Marie Curie born\n2. I googled: What did Marie Curie discover?",
        " Where was Marie Curie born?",
    ]
    async with LoopbackChat(lambda messages, i: samples[i % 3]) as server:
        async with ChatClient(server.base_url) as client:
            questions = await LLMQuestionGenerator(client).generate(
                "She was born in Warsaw in 1867.", context="Marie Curie was a physicist."
            )
    assert [q.text for q in questions] == [
        "When was Marie Curie born?",
        "Where was Marie Curie born?",
        "What did Marie Curie discover?",
    ]
    request = server.requests[0]
    assert request["n"] == 3 and request["temperature"] == pytest.approx(0.7)
    assert fenced(_user(request["messages"])) == [
        "Marie Curie was a physicist.",
        "She was born in Warsaw in 1867.",
    ]
