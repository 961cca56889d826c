"""Check-worthiness: which sentences are checked, and the reason a skipped one gives."""

from __future__ import annotations

import pytest

from middleware.pipeline.checkworthy import assess, skipped_verdict


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


def test_instructions_and_judgements_are_checked_where_the_request_brings_documents():
    from middleware.pipeline.checkworthy import assess

    for text in ("Remove the pan from the heat after nine minutes.", "It is a great choice for those looking for healthy food."):
        skipped = assess(text)
        assert not skipped.checkworthy and skipped.given_documents().checkworthy
    for text in ("Hope this helps!", "What is the capital of France?"):
        assert not assess(text).given_documents().checkworthy


@pytest.mark.parametrize(
    "text",
    [
        "Unable to answer based on given passages.",
        "Therefore, I cannot answer the question based on the given passages.",
        "However, the passages do not provide specific cutoff values for a high PSA level.",
        "Passage 1: The passage does not provide information on how to roast garlic cloves.",
        "Reservations are not mentioned in the data.",
        "To cook brats, follow these steps:",
        "Based on the provided structured data, here is an objective overview of Blaze Pizza:",
    ],
)
def test_what_an_answer_says_about_its_sources_is_not_checked_even_with_documents(text: str) -> None:
    worthiness = assess(text)
    assert worthiness.reason == "meta"
    assert not worthiness.given_documents().checkworthy


@pytest.mark.parametrize(
    "text",
    [
        "The petition states that Mitchell is unable to provide for her own needs.",
        "However, they do not offer Wi-Fi access, and live music is not mentioned in the data.",
        "The restaurant does not provide WiFi.",
        "The data center does not provide backups on weekends.",
        "Their hours are Monday to Friday, 9 AM to 5 PM.",
    ],
)
def test_statements_about_the_world_stay_checked(text: str) -> None:
    assert assess(text).given_documents().checkworthy
