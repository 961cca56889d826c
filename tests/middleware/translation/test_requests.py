"""Requests in each other's terms: a chat completions request crosses to the Responses API and the
Messages API and comes back whole (messages, tool calls, tools, sampling), and the Messages
request has its system prompt and alternating roles."""

from __future__ import annotations

import pytest

from middleware.translation import requests

CHAT_REQUEST = {
    "model": "m", "max_tokens": 50, "temperature": 0.2, "stream": True,
    "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Find x."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "x is 3"},
    ],
    "tools": [{"type": "function", "function": {"name": "lookup", "description": "d",
                                                "parameters": {"type": "object"}}}],
}


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_a_request_crosses_and_comes_back(api):
    there = requests.translate_request(CHAT_REQUEST, "chat", api)
    back = requests.translate_request(there, api, "chat")
    assert back["messages"] == CHAT_REQUEST["messages"]
    assert back["tools"] == CHAT_REQUEST["tools"]
    assert (back["max_tokens"], back["temperature"], back["stream"]) == (50, 0.2, True)


def test_the_messages_request_has_its_system_prompt_and_alternating_roles():
    body = requests.translate_request(CHAT_REQUEST, "chat", "messages")
    assert body["system"] == "Be brief."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][2]["content"][0] == {"type": "tool_result", "tool_use_id": "call_1", "content": "x is 3"}
