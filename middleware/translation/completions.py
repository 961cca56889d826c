"""Non-stream answers of one API as another's, through a chat completion; and each API's
answer text (what is checked) and how to put a corrected text back."""

from __future__ import annotations

import json
import time
from typing import Any

from middleware.translation.streams import WITHHELD, from_anthropic_stop, new_id, to_anthropic_stop
from middleware.translation.via_chat import Translate, unchanged, via_chat


def _chat(id_: str, model: str, text: str | None, calls: list[dict[str, Any]], finish: str,
          prompt: int, completion: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return {"id": id_, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}


def _choice0(completion: dict[str, Any]) -> tuple[dict[str, Any], str]:
    choices = completion.get("choices") or [{}]
    return choices[0].get("message") or {}, choices[0].get("finish_reason") or "stop"


def responses_to_chat(response: dict[str, Any]) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in response.get("output") or []:
        if item.get("type") == "message":
            texts += [part.get("text", "") for part in item.get("content") or [] if part.get("type") == "output_text"]
        elif item.get("type") == "function_call":
            calls.append({"id": item.get("call_id"), "type": "function",
                          "function": {"name": item.get("name"), "arguments": item.get("arguments") or ""}})
    usage = response.get("usage") or {}
    incomplete = (response.get("incomplete_details") or {}).get("reason") == "max_output_tokens"
    finish = "tool_calls" if calls else "length" if incomplete else "stop"
    return _chat(str(response.get("id")), str(response.get("model")), "".join(texts) if texts else None, calls,
                 finish, usage.get("input_tokens", 0), usage.get("output_tokens", 0))


def chat_to_responses(completion: dict[str, Any]) -> dict[str, Any]:
    message, finish = _choice0(completion)
    output: list[dict[str, Any]] = []
    if isinstance(message.get("content"), str):
        output.append({"id": new_id("msg_"), "type": "message", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": message["content"], "annotations": []}]})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        output.append({"id": new_id("fc_"), "type": "function_call", "status": "completed", "call_id": call.get("id"),
                       "name": function.get("name"), "arguments": function.get("arguments") or ""})
    usage = completion.get("usage") or {}
    return {"id": new_id("resp_"), "object": "response", "created_at": int(time.time()),
            "status": "incomplete" if finish == "length" else "completed", "model": completion.get("model"),
            "output": output, "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if finish == "length" else None,
            "instructions": None, "metadata": {}, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "temperature": None, "top_p": None,
            "usage": {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0),
                      "total_tokens": usage.get("total_tokens", 0), "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def messages_to_chat(message: dict[str, Any]) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in message.get("content") or []:
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            calls.append({"id": block.get("id"), "type": "function",
                          "function": {"name": block.get("name"), "arguments": json.dumps(block.get("input") or {})}})
    usage = message.get("usage") or {}
    return _chat(str(message.get("id")), str(message.get("model")), "".join(texts) if texts else None, calls,
                 from_anthropic_stop(message.get("stop_reason")), usage.get("input_tokens", 0),
                 usage.get("output_tokens", 0))


def chat_to_messages(completion: dict[str, Any]) -> dict[str, Any]:
    message, finish = _choice0(completion)
    content: list[dict[str, Any]] = []
    if isinstance(message.get("content"), str):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {}
        content.append({"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": arguments})
    usage = completion.get("usage") or {}
    return {"id": new_id("msg_"), "type": "message", "role": "assistant", "model": completion.get("model"),
            "content": content, "stop_reason": to_anthropic_stop(finish), "stop_sequence": None,
            "usage": {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0)}}


TO_CHAT: dict[str, Translate] = {"chat": unchanged, "responses": responses_to_chat, "messages": messages_to_chat}
FROM_CHAT: dict[str, Translate] = {"chat": unchanged, "responses": chat_to_responses, "messages": chat_to_messages}


def translate_answer(answer: dict[str, Any], source: str, target: str) -> dict[str, Any]:
    """A non-stream answer of API ``source`` as one of API ``target`` (itself when the same)."""
    return via_chat(answer, source, target, TO_CHAT, FROM_CHAT)


# ------------------------------------------------------------------- the text that is checked


def _text_parts(answer: dict[str, Any], api: str) -> list[dict[str, Any]]:
    """The parts holding the answer's text, each a dict whose ``text`` (or ``content``) is it."""
    if api == "responses":
        return [part for item in answer.get("output") or [] if isinstance(item, dict) and item.get("type") == "message"
                for part in item.get("content") or [] if isinstance(part, dict) and part.get("type") == "output_text"]
    if api == "messages":
        return [block for block in answer.get("content") or []
                if isinstance(block, dict) and block.get("type") == "text"]
    choices = answer.get("choices")
    message = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    return [message] if isinstance(message, dict) and isinstance(message.get("content"), str) else []


def _key(api: str) -> str:
    return "content" if api == "chat" else "text"


def answer_text(answer: dict[str, Any], api: str) -> str | None:
    """The text of a non-stream answer of ``api``, or None when it has none."""
    parts = _text_parts(answer, api)
    texts = [part.get(_key(api)) for part in parts]
    return "".join(t for t in texts if isinstance(t, str)) if parts else None


def withhold(answer: dict[str, Any], api: str) -> None:
    """Block mode: mark the answer as cut short for withheld content, as ``api`` says it
    (``finish_reason: "content_filter"``, a response ``incomplete`` for ``content_filter``,
    ``stop_reason: "refusal"``), and drop what a stopped stream would not have sent: tool
    calls and every other part but the text (which ``replace_text`` truncates)."""
    if api == "responses":
        answer.update(status="incomplete", incomplete_details={"reason": WITHHELD})
        answer["output"] = [{**item, "status": "incomplete"} for item in answer.get("output") or []
                            if isinstance(item, dict) and item.get("type") == "message"]
    elif api == "messages":
        answer["stop_reason"] = to_anthropic_stop(WITHHELD)
        answer["content"] = _text_parts(answer, api)
    else:
        for message in _text_parts(answer, api):
            for key in ("tool_calls", "function_call"):
                message.pop(key, None)
        choices = answer.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            choices[0]["finish_reason"] = WITHHELD


def replace_text(answer: dict[str, Any], api: str, text: str) -> None:
    """Correct mode: the answer's text becomes ``text``, in its first text part; any later
    text parts are emptied (their text is part of ``text``)."""
    for i, part in enumerate(_text_parts(answer, api)):
        part[_key(api)] = text if i == 0 else ""
