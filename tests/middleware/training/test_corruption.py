"""Corrupting sentences for training data: one span of the asked type swapped, and a modifier
dropped but never under a negation."""

from __future__ import annotations

import random

from middleware.training.corruption import corrupt_sentence, entity_pool, shorten_sentence


def test_corrupt_sentence_swaps_one_span_of_the_asked_type():
    from middleware.text.nlp import get_nlp

    nlp = get_nlp()
    doc = nlp("The Eiffel Tower in Paris was completed in March 1889 and has 1,665 steps.")
    rng = random.Random(3)
    date = corrupt_sentence(doc, "date", rng)
    assert date is not None and date.label in {"DATE", "TIME"} and date.original in doc.text
    assert date.text != doc.text and date.replacement in date.text
    assert date.text[: date.start] == doc.text[: date.start]
    number = corrupt_sentence(doc, "number", rng)
    assert number is not None and number.original == "1,665" and number.replacement != "1,665"
    pool = entity_pool([nlp("Rome and Berlin are capitals.")])
    entity = corrupt_sentence(doc, "entity", rng, pool)
    assert entity is not None and entity.replacement in {"Rome", "Berlin"}
    assert corrupt_sentence(nlp("It is nice."), "any", rng) is None


def test_shorten_sentence_drops_a_modifier_but_not_under_negation():
    from middleware.text.nlp import get_nlp

    nlp = get_nlp()
    text = "A tall man in a red shirt plays guitar on the street."
    short = shorten_sentence(nlp(text), random.Random(0))
    assert short and short != text and set(short.rstrip(".").split()) <= set(text.rstrip(".").split())
    assert shorten_sentence(nlp("The man did not play guitar on the street."), random.Random(0)) is None
