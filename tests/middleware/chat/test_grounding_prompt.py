"""According-to prompting: the instruction in the paper's form, where it goes in the body, and
the option that asks for it (the request's ``factcheck.grounding_prompt``, the server default)."""

from __future__ import annotations

import copy
import json

import pytest

from middleware.chat.grounding_prompt import (
    add_grounding,
    anti_grounding_instruction,
    grounding_instruction,
    requested_corpus,
    with_instruction,
)
from middleware.chat.parsing import parse_chat_request
from middleware.chat.protocol import ChatRequest
from middleware.errors import RequestError
from middleware.settings import SettingsError, load_settings
from middleware.types import Mode

INSTRUCTION = grounding_instruction("Wikipedia")


def test_the_instructions_are_the_papers():
    assert INSTRUCTION == "Respond to this question using only information that can be attributed to Wikipedia."
    assert anti_grounding_instruction("Wikipedia") == "Respond without using any information from Wikipedia in your response."


def body_with(*messages: dict) -> dict:
    return {"model": "m", "messages": list(messages), "temperature": 0.2}


def test_appended_to_the_last_user_message_and_nothing_else():
    body = body_with({"role": "system", "content": "Be brief."}, {"role": "user", "content": "First?"},
                     {"role": "assistant", "content": "Yes."}, {"role": "user", "content": "Who was Marie Curie?"})
    before = copy.deepcopy(body)
    grounded, placed = with_instruction(body, INSTRUCTION, "append")
    assert placed == "append"
    assert body == before  # the body given is never changed
    assert grounded["messages"][-1] == {"role": "user", "content": f"Who was Marie Curie? {INSTRUCTION}"}
    assert grounded["messages"][:-1] == before["messages"][:-1]
    assert {k: v for k, v in grounded.items() if k != "messages"} == {"model": "m", "temperature": 0.2}


def test_appended_to_a_user_message_before_a_prefilled_assistant_turn():
    body = body_with({"role": "user", "content": "Q?\n"}, {"role": "assistant", "content": "A:"})
    grounded, _ = with_instruction(body, INSTRUCTION, "append")
    assert grounded["messages"][0]["content"] == f"Q?\n{INSTRUCTION}"  # no space after whitespace
    assert grounded["messages"][1] == {"role": "assistant", "content": "A:"}


def test_multi_part_content_gets_a_text_part_of_its_own():
    parts = [{"type": "text", "text": "What is in this picture?"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    body = body_with({"role": "user", "content": parts})
    before = copy.deepcopy(body)
    grounded, _ = with_instruction(body, INSTRUCTION, "append")
    assert grounded["messages"][0]["content"] == [*before["messages"][0]["content"], {"type": "text", "text": INSTRUCTION}]
    assert body == before
    ChatRequest.model_validate(grounded)  # still a valid request


@pytest.mark.parametrize("content", [None, ""])
def test_an_empty_user_message_becomes_the_instruction(content):
    grounded, _ = with_instruction(body_with({"role": "user", "content": content}), INSTRUCTION, "append")
    assert grounded["messages"][0]["content"] == INSTRUCTION


def test_system_placement_follows_the_leading_system_messages():
    body = body_with({"role": "system", "content": "Be brief."}, {"role": "developer", "content": "No lists."},
                     {"role": "user", "content": "Q?"})
    grounded, placed = with_instruction(body, INSTRUCTION, "system")
    assert placed == "system"
    assert [m["role"] for m in grounded["messages"]] == ["system", "developer", "system", "user"]
    assert grounded["messages"][2] == {"role": "system", "content": INSTRUCTION}
    assert grounded["messages"][3] == {"role": "user", "content": "Q?"}
    assert len(body["messages"]) == 3


def test_no_user_message_to_append_to_gets_a_system_message():
    grounded, placed = with_instruction(body_with({"role": "assistant", "content": "Hi"}), INSTRUCTION, "append")
    assert placed == "system" and grounded["messages"][0] == {"role": "system", "content": INSTRUCTION}


def test_add_grounding_reports_what_it_added():
    grounded, added = add_grounding(body_with({"role": "user", "content": "Q?"}), "the demo corpus", "append")
    assert added.corpus == "the demo corpus" and added.placement == "append"
    assert added.instruction == grounding_instruction("the demo corpus")
    assert grounded["messages"][0]["content"].endswith(added.instruction)


@pytest.mark.parametrize(
    ("option", "default", "mode", "expected"),
    [
        (None, None, Mode.ANNOTATE, None),
        ("Wikipedia", None, Mode.ANNOTATE, "Wikipedia"),
        (None, "Wikipedia", Mode.CORRECT, "Wikipedia"),
        ("PubMed", "Wikipedia", Mode.ANNOTATE, "PubMed"),  # the request wins
        ("off", "Wikipedia", Mode.ANNOTATE, None),
        ("OFF", "Wikipedia", Mode.ANNOTATE, None),
        (None, "off", Mode.ANNOTATE, None),
        (None, "Wikipedia", Mode.OFF, None),  # off mode: the server never rewrites on its own
        ("Wikipedia", None, Mode.OFF, "Wikipedia"),  # ... but does what the request asks
    ],
)
def test_requested_corpus(option, default, mode, expected):
    assert requested_corpus(option, default, mode) == expected


def test_the_option_is_parsed_from_the_body_and_stripped_before_forwarding():
    raw = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Q?"}],
                      "factcheck": {"mode": "annotate", "grounding_prompt": "  Wikipedia "}}).encode()
    chat, forward = parse_chat_request(raw, max_messages=8)
    assert chat.factcheck is not None and chat.factcheck.grounding_prompt == "Wikipedia"
    assert "factcheck" not in forward
    chat, _ = parse_chat_request(b'{"messages": [{"role": "user", "content": "Q?"}], "factcheck": "annotate"}', 8)
    assert chat.factcheck is not None and chat.factcheck.grounding_prompt is None


@pytest.mark.parametrize("bad", ["", "   ", "Wiki\npedia", "x" * 201, 5, True, ["Wikipedia"]])
def test_a_corpus_name_is_one_line_of_text(bad):
    raw = json.dumps({"messages": [{"role": "user", "content": "Q?"}], "factcheck": {"grounding_prompt": bad}})
    with pytest.raises(RequestError) as error:
        parse_chat_request(raw.encode(), 8)
    assert error.value.status == 400 and "grounding_prompt" in str(error.value)


def test_the_server_default_comes_from_settings(monkeypatch):
    assert load_settings().check.grounding_prompt is None
    assert load_settings().check.grounding_placement == "append"
    monkeypatch.setenv("FACTCHECK_CHECK__GROUNDING_PROMPT", "Wikipedia")
    monkeypatch.setenv("FACTCHECK_CHECK__GROUNDING_PLACEMENT", "system")
    settings = load_settings()
    assert settings.check.grounding_prompt == "Wikipedia" and settings.check.grounding_placement == "system"
    with pytest.raises(SettingsError, match="check.grounding_placement"):
        load_settings(**{"check.grounding_placement": "prepend"})
