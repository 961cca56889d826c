"""Streams in each other's terms: a chat completions stream crosses to the Responses API and the
Messages API and comes back as a chat client sees it (text, tool calls, usage, stop reason), and
the Messages stream names its blocks and stop reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from middleware.translation.streams import (
    DONE,
    ChatToMessages,
    ChatToResponses,
    MessagesToChat,
    ResponsesToChat,
)

BASE = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
CALL = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": ""}}


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict[str, int] | None = None):
    data = {**BASE, "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return {**data, "usage": usage} if usage else data


CHAT_STREAM = [
    chunk({"role": "assistant", "content": ""}), chunk({"content": "Let me "}), chunk({"content": "look."}),
    chunk({"tool_calls": [CALL]}), chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q":'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "x"}'}}]}), chunk({}, "tool_calls"),
    chunk(usage={"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}),
]


def what_a_chat_client_sees(chunks: list[Any]) -> dict[str, Any]:
    text, calls, finish, usage = "", {}, None, None
    for data in chunks:
        if data == DONE:
            continue
        usage = data.get("usage") or usage
        for choice in data["choices"]:
            text += choice["delta"].get("content") or ""
            finish = choice.get("finish_reason") or finish
            for call in choice["delta"].get("tool_calls") or []:
                entry = calls.setdefault(call["index"], {"id": None, "name": None, "arguments": ""})
                entry["id"] = call.get("id") or entry["id"]
                entry["name"] = (call.get("function") or {}).get("name") or entry["name"]
                entry["arguments"] += (call.get("function") or {}).get("arguments") or ""
    return {"text": text, "calls": calls, "finish": finish, "usage": usage}


@pytest.mark.parametrize(("writer", "reader"), [(ChatToResponses, ResponsesToChat), (ChatToMessages, MessagesToChat)])
def test_a_stream_crosses_and_comes_back(writer, reader):
    out, back = writer(), reader()
    events = [event for data in CHAT_STREAM for event in out.feed(data)] + out.finish()
    returned = [piece for event in events for piece in back.feed(json.loads(json.dumps(event)))]
    assert returned[-1] == DONE
    assert what_a_chat_client_sees(returned) == what_a_chat_client_sees(CHAT_STREAM)


def test_the_messages_stream_names_its_blocks_and_stop_reason():
    writer = ChatToMessages()
    events = [event for data in CHAT_STREAM for event in writer.feed(data)] + writer.finish()
    starts = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert starts == ["text", "tool_use"]
    assert events[-2]["delta"]["stop_reason"] == "tool_use" and events[-2]["usage"] == {"input_tokens": 5, "output_tokens": 9}
