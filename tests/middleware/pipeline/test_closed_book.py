"""The memory check's closed-book request: the body without the context (the model kept, tools and
sampling options dropped), and the question without the pasted documents."""

from __future__ import annotations

import pytest

from middleware.pipeline.closed_book import closed_book_body, closed_book_question
from tests.support.context_doubles import DOCUMENT, FOLLOWS, PASTED, QUESTION, body


pytestmark = pytest.mark.usefixtures("warm_spacy")


def test_closed_book_body_drops_the_context_and_keeps_the_model():
    forward = {**body(FOLLOWS), "tools": [{"type": "function"}], "tool_choice": "auto", "n": 2, "max_tokens": 900}
    forward.pop("factcheck")
    closed = closed_book_body(forward, QUESTION, 64)
    assert closed["messages"] == [{"role": "user", "content": QUESTION}]
    assert (closed["model"], closed["temperature"], closed["stream"], closed["max_tokens"]) == ("m", 0.2, False, 64)
    assert not {"tools", "tool_choice", "n", "stream_options"} & closed.keys()
    assert closed_book_body({"max_completion_tokens": 500}, QUESTION, 64)["max_completion_tokens"] == 64


def test_closed_book_question_leaves_pasted_documents_out():
    assert closed_book_question(QUESTION) == QUESTION
    assert closed_book_question(PASTED) == "What does it say about the founder?"
    instruction = f"Summarise the memo below.\n\n{DOCUMENT} {DOCUMENT} {DOCUMENT}"
    assert closed_book_question(instruction) == "Summarise the memo below."
