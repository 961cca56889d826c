"""Non-stream answers in each other's terms: a chat completion crosses to the Responses API and the
Messages API and comes back (text, tool calls, stop reason, usage), and correct mode replaces the
answer's text in each."""

from __future__ import annotations

import pytest

from middleware.translation import completions

COMPLETION = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
              "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                  "role": "assistant", "content": "Let me look.", "tool_calls": [
                      {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}]}}],
              "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}}


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_an_answer_crosses_and_comes_back(api):
    there = completions.translate_answer(COMPLETION, "chat", api)
    assert completions.answer_text(there, api) == "Let me look."
    back = completions.translate_answer(there, api, "chat")
    assert back["choices"][0]["message"] == COMPLETION["choices"][0]["message"]
    assert back["choices"][0]["finish_reason"] == "tool_calls" and back["usage"] == COMPLETION["usage"]


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_correct_mode_replaces_the_answer_text(api):
    answer = completions.translate_answer(COMPLETION, "chat", api)
    completions.replace_text(answer, api, "Let me see.")
    assert completions.answer_text(answer, api) == "Let me see."
