"""Request bodies of one API as another's, through a chat completions body.

What crosses: the model, the system prompt, the conversation's text, tool definitions, tool
calls and tool results, the output limit, temperature, top_p, stop sequences and ``stream``.
The ``factcheck`` field never reaches here (the front door strips it); fields the other API
has no name for are dropped, since its server would refuse them.
"""

from __future__ import annotations

import json
from typing import Any

from middleware.translation.via_chat import Translate, unchanged, via_chat

DEFAULT_MAX_TOKENS = 4096
"""The Messages API needs ``max_tokens``; a chat or Responses request may leave it out."""

_SAMPLING = ("temperature", "top_p")


def _text_of(content: Any) -> str:
    """The text of a content that is a string or a list of parts of any of the three APIs."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content
                       if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text"))
    return ""


# ------------------------------------------------------------------------ Responses <-> chat


def responses_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": item.get("role", "user"), "content": _text_of(item.get("content"))})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments") or ""}}
            if messages and messages[-1]["role"] == "assistant" and "tool_calls" in messages[-1]:
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": _text_of(item.get("output"))})
    out: dict[str, Any] = {"model": body.get("model"), "messages": messages, "stream": bool(body.get("stream"))}
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    out.update({key: body[key] for key in _SAMPLING if body.get(key) is not None})
    tools = [{"type": "function", "function": {key: tool[key] for key in ("name", "description", "parameters")
                                                if key in tool}}
             for tool in body.get("tools") or [] if isinstance(tool, dict) and tool.get("type") == "function"]
    if tools:
        out["tools"] = tools
    if out["stream"]:
        out["stream_options"] = {"include_usage": True}
    return out


def chat_to_responses(body: dict[str, Any]) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": message.get("tool_call_id"),
                          "output": _text_of(message.get("content"))})
            continue
        if text := _text_of(message.get("content")):
            items.append({"type": "message", "role": role, "content": text})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            items.append({"type": "function_call", "call_id": call.get("id"), "name": function.get("name"),
                          "arguments": function.get("arguments") or ""})
    out: dict[str, Any] = {"model": body.get("model"), "input": items, "stream": bool(body.get("stream"))}
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None:
        out["max_output_tokens"] = limit
    out.update({key: body[key] for key in _SAMPLING if body.get(key) is not None})
    tools = [{"type": "function", **(tool.get("function") or {})}
             for tool in body.get("tools") or [] if isinstance(tool, dict) and tool.get("type") == "function"]
    if tools:
        out["tools"] = tools
    return out


# ------------------------------------------------------------------------- Messages <-> chat


def messages_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if system := _text_of(body.get("system")):
        messages.append({"role": "system", "content": system})
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        calls = [{"id": b.get("id"), "type": "function",
                  "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})}}
                 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                messages.append({"role": "tool", "tool_call_id": block.get("tool_use_id"),
                                 "content": _text_of(block.get("content"))})
        text = _text_of(blocks)
        if text or calls:
            chat: dict[str, Any] = {"role": message.get("role", "user"), "content": text or None}
            if calls:
                chat["tool_calls"] = calls
            messages.append(chat)
    out: dict[str, Any] = {"model": body.get("model"), "messages": messages, "stream": bool(body.get("stream"))}
    if body.get("max_tokens") is not None:
        out["max_tokens"] = body["max_tokens"]
    if body.get("stop_sequences"):
        out["stop"] = body["stop_sequences"]
    out.update({key: body[key] for key in _SAMPLING if body.get(key) is not None})
    tools = [{"type": "function", "function": {"name": tool.get("name"), "description": tool.get("description", ""),
                                               "parameters": tool.get("input_schema") or {}}}
             for tool in body.get("tools") or [] if isinstance(tool, dict) and "name" in tool]
    if tools:
        out["tools"] = tools
    if out["stream"]:
        out["stream_options"] = {"include_usage": True}
    return out


def chat_to_messages(body: dict[str, Any]) -> dict[str, Any]:
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(_text_of(message.get("content")))
            continue
        blocks: list[dict[str, Any]] = []
        if role == "tool":
            role = "user"
            blocks.append({"type": "tool_result", "tool_use_id": message.get("tool_call_id"),
                           "content": _text_of(message.get("content"))})
        elif text := _text_of(message.get("content")):
            blocks.append({"type": "text", "text": text})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            blocks.append({"type": "tool_use", "id": call.get("id"), "name": function.get("name"),
                           "input": _json_object(function.get("arguments"))})
        if messages and messages[-1]["role"] == role:  # the Messages API alternates roles
            messages[-1]["content"] += blocks
        else:
            messages.append({"role": role, "content": blocks})
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    out: dict[str, Any] = {"model": body.get("model"), "messages": messages,
                           "max_tokens": limit if limit is not None else DEFAULT_MAX_TOKENS,
                           "stream": bool(body.get("stream"))}
    if system:
        out["system"] = "\n\n".join(system)
    stop = body.get("stop")
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    out.update({key: body[key] for key in _SAMPLING if body.get(key) is not None})
    tools = [{"name": (tool.get("function") or {}).get("name"), "description": (tool.get("function") or {}).get(
        "description", ""), "input_schema": (tool.get("function") or {}).get("parameters") or {"type": "object"}}
             for tool in body.get("tools") or [] if isinstance(tool, dict) and tool.get("type") == "function"]
    if tools:
        out["tools"] = tools
    return out


def _json_object(arguments: Any) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


TO_CHAT: dict[str, Translate] = {"chat": unchanged, "responses": responses_to_chat, "messages": messages_to_chat}
FROM_CHAT: dict[str, Translate] = {"chat": unchanged, "responses": chat_to_responses, "messages": chat_to_messages}


def translate_request(body: dict[str, Any], source: str, target: str) -> dict[str, Any]:
    """A request body of API ``source`` as one of API ``target`` (itself when they are the same)."""
    return via_chat(body, source, target, TO_CHAT, FROM_CHAT)
