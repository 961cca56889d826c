"""Streamed events of one API as another's, through chat completions chunks.

A reader turns one upstream event's JSON into chat chunks (``ResponsesToChat``,
``MessagesToChat``); a writer turns chat chunks into the face's events (``ChatToResponses``,
``ChatToMessages``) and closes the answer in ``finish``. What a chat chunk carries is what
crosses: text, tool calls and their arguments, the finish reason and the usage. Blocks the
other API has no place for (Anthropic thinking, Responses reasoning items) do not cross.
"""

from __future__ import annotations

import json
import time
import uuid
from abc import ABC, abstractmethod
from typing import Any, Protocol

from middleware.errors import UpstreamError

ChatEvent = dict[str, Any] | str
"""A chat chunk, or ``"[DONE]"``."""
DONE = "[DONE]"

_TO_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
                      "function_call": "tool_use", "content_filter": "refusal"}
_FROM_ANTHROPIC_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                        "tool_use": "tool_calls", "refusal": "content_filter", "pause_turn": "stop"}


WITHHELD = "content_filter"
"""Content withheld (block mode): chat completions' ``finish_reason`` and the Responses API's
``incomplete_details.reason``; the Messages API's ``stop_reason`` is its ``to_anthropic_stop``
(``refusal``)."""


def to_anthropic_stop(reason: str | None) -> str:
    return _TO_ANTHROPIC_STOP.get(reason or "stop", "end_turn")


def from_anthropic_stop(reason: str | None) -> str:
    return _FROM_ANTHROPIC_STOP.get(reason or "end_turn", "stop")


class Reader(Protocol):
    def feed(self, data: dict[str, Any]) -> list[ChatEvent]: ...


class Writer(Protocol):
    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]: ...

    def finish(self) -> list[dict[str, Any]]: ...


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


class _ChatChunks:
    """Chat chunks of one answer, under one id and model."""

    def __init__(self) -> None:
        self.id = new_id("chatcmpl-")
        self.model = "unknown"
        self.created = int(time.time())

    def chunk(self, delta: dict[str, Any] | None = None, finish: str | None = None,
              usage: dict[str, Any] | None = None) -> dict[str, Any]:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        data: dict[str, Any] = {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                                "model": self.model, "choices": choices}
        if usage is not None:
            data["usage"] = usage
        return data


def chat_usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def upstream_failure(message: str, kind: str = "status") -> UpstreamError:
    return UpstreamError(f"upstream failed mid-stream: {message}", 502, kind=kind)


class ResponsesToChat:
    """OpenAI Responses events → chat chunks."""

    def __init__(self) -> None:
        self._out = _ChatChunks()
        self._calls: dict[str, int] = {}

    def feed(self, data: dict[str, Any]) -> list[ChatEvent]:
        kind = data.get("type")
        if kind == "response.created":
            response = data.get("response") or {}
            self._out.id = str(response.get("id") or self._out.id)
            self._out.model = str(response.get("model") or self._out.model)
            return [self._out.chunk({"role": "assistant", "content": ""})]
        if kind == "response.output_text.delta":
            return [self._out.chunk({"content": data.get("delta") or ""})]
        if kind == "response.output_item.added" and (item := data.get("item") or {}).get("type") == "function_call":
            index = self._calls.setdefault(str(item.get("id")), len(self._calls))
            call = {"index": index, "id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": ""}}
            return [self._out.chunk({"tool_calls": [call]})]
        if kind == "response.function_call_arguments.delta" and (item_id := str(data.get("item_id"))) in self._calls:
            call = {"index": self._calls[item_id], "function": {"arguments": data.get("delta") or ""}}
            return [self._out.chunk({"tool_calls": [call]})]
        if kind in ("response.completed", "response.incomplete"):
            response = data.get("response") or {}
            usage = response.get("usage") or {}
            incomplete = (response.get("incomplete_details") or {}).get("reason") == "max_output_tokens"
            finish = "tool_calls" if self._calls else "length" if incomplete else "stop"
            return [self._out.chunk({}, finish),
                    self._out.chunk(usage=chat_usage(usage.get("input_tokens", 0), usage.get("output_tokens", 0))),
                    DONE]
        if kind in ("response.failed", "error"):
            error = (data.get("response") or {}).get("error") or data
            raise upstream_failure(str(error.get("message") or kind))
        return []


class MessagesToChat:
    """Anthropic Messages events → chat chunks."""

    def __init__(self) -> None:
        self._out = _ChatChunks()
        self._calls: dict[int, int] = {}
        self._input_tokens = 0
        self._output_tokens = 0

    def feed(self, data: dict[str, Any]) -> list[ChatEvent]:
        kind = data.get("type")
        if kind == "message_start":
            message = data.get("message") or {}
            self._out.id = str(message.get("id") or self._out.id)
            self._out.model = str(message.get("model") or self._out.model)
            self._input_tokens = int((message.get("usage") or {}).get("input_tokens") or 0)
            return [self._out.chunk({"role": "assistant", "content": ""})]
        if kind == "content_block_start":
            block = data.get("content_block") or {}
            if block.get("type") == "text" and block.get("text"):
                return [self._out.chunk({"content": block["text"]})]
            if block.get("type") == "tool_use":
                index = self._calls.setdefault(int(data.get("index", 0)), len(self._calls))
                call = {"index": index, "id": block.get("id"), "type": "function",
                        "function": {"name": block.get("name"), "arguments": ""}}
                return [self._out.chunk({"tool_calls": [call]})]
            return []
        if kind == "content_block_delta":
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta":
                return [self._out.chunk({"content": delta.get("text") or ""})]
            at = int(data.get("index", 0))
            if delta.get("type") == "input_json_delta" and at in self._calls:
                call = {"index": self._calls[at], "function": {"arguments": delta.get("partial_json") or ""}}
                return [self._out.chunk({"tool_calls": [call]})]
            return []
        if kind == "message_delta":
            usage = data.get("usage") or {}
            self._output_tokens = int(usage.get("output_tokens") or self._output_tokens)
            self._input_tokens = int(usage.get("input_tokens") or self._input_tokens)
            stop = (data.get("delta") or {}).get("stop_reason")
            return [self._out.chunk({}, from_anthropic_stop(stop))] if stop else []
        if kind == "message_stop":
            return [self._out.chunk(usage=chat_usage(self._input_tokens, self._output_tokens)), DONE]
        if kind == "error":
            raise upstream_failure(str((data.get("error") or {}).get("message") or "error event"))
        return []


class _ChatChunkWriter(ABC):
    """What every writer reads of a chat chunk: the first chunk opens the answer
    (``_start``), then the usage, choice 0's text (``_text``), its tool-call fragments
    (``_tool_call``) and its finish reason."""

    def __init__(self) -> None:
        self._started = False
        self._finish: str | None = None
        self._usage: dict[str, Any] = {}

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        out = self._opening(chunk)
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str) and delta["content"]:
                out += self._text(delta["content"])
            for call in delta.get("tool_calls") or []:
                out += self._tool_call(call)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return out

    def _opening(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        """The events that open the answer, the first time only (an empty answer is opened by
        ``finish``)."""
        if self._started:
            return []
        self._started = True
        return self._start(chunk)

    @abstractmethod
    def _start(self, chunk: dict[str, Any]) -> list[dict[str, Any]]: ...

    @abstractmethod
    def _text(self, text: str) -> list[dict[str, Any]]: ...

    @abstractmethod
    def _tool_call(self, call: dict[str, Any]) -> list[dict[str, Any]]: ...


class ChatToResponses(_ChatChunkWriter):
    """Chat chunks → OpenAI Responses events, ``response.completed`` last (in ``finish``)."""

    def __init__(self) -> None:
        super().__init__()
        self._id = new_id("resp_")
        self._model = "unknown"
        self._created = int(time.time())
        self._sequence = 0
        self._message: dict[str, Any] | None = None
        self._calls: dict[int, dict[str, Any]] = {}
        self._output: list[dict[str, Any]] = []
        self._open: list[int] = []

    def finish(self) -> list[dict[str, Any]]:
        out = self._opening({})
        out += self._close_all()
        status = "incomplete" if self._finish == "length" else "completed"
        response = self._response(status)
        response["output"] = self._output
        response["usage"] = {
            "input_tokens": self._usage.get("prompt_tokens", 0), "output_tokens": self._usage.get("completion_tokens", 0),
            "total_tokens": self._usage.get("total_tokens", 0), "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        if status == "incomplete":
            response["incomplete_details"] = {"reason": "max_output_tokens"}
        return out + [self._event(f"response.{status}", response=response)]

    def _start(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        self._model = str(chunk.get("model") or self._model)
        return [self._event("response.created", response=self._response("in_progress")),
                self._event("response.in_progress", response=self._response("in_progress"))]

    def _text(self, text: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self._message is None:
            out += self._close_all()
            item = {"id": new_id("msg_"), "type": "message", "status": "in_progress", "role": "assistant", "content": []}
            self._message = {"item": item, "index": len(self._output), "text": ""}
            self._output.append(item)
            out.append(self._event("response.output_item.added", output_index=self._message["index"], item=dict(item)))
            out.append(self._event("response.content_part.added", item_id=item["id"],
                                   output_index=self._message["index"], content_index=0, part=_text_part("")))
        self._message["text"] += text
        out.append(self._event("response.output_text.delta", item_id=self._message["item"]["id"],
                               output_index=self._message["index"], content_index=0, delta=text, logprobs=[]))
        return out

    def _tool_call(self, call: dict[str, Any]) -> list[dict[str, Any]]:
        index = int(call.get("index", 0))
        function = call.get("function") or {}
        out: list[dict[str, Any]] = []
        if index not in self._calls:
            out += self._close_message()
            item = {"id": new_id("fc_"), "type": "function_call", "status": "in_progress",
                    "call_id": call.get("id") or new_id("call_"), "name": function.get("name") or "", "arguments": ""}
            self._calls[index] = {"item": item, "index": len(self._output)}
            self._output.append(item)
            self._open.append(index)
            out.append(self._event("response.output_item.added", output_index=len(self._output) - 1, item=dict(item)))
        entry = self._calls[index]
        if arguments := function.get("arguments"):
            entry["item"]["arguments"] += arguments
            out.append(self._event("response.function_call_arguments.delta", item_id=entry["item"]["id"],
                                   output_index=entry["index"], delta=arguments))
        return out

    def _close_message(self) -> list[dict[str, Any]]:
        if self._message is None:
            return []
        message, self._message = self._message, None
        item, index, text = message["item"], message["index"], message["text"]
        item.update(status="completed", content=[_text_part(text)])
        return [
            self._event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                        text=text, logprobs=[]),
            self._event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                        part=_text_part(text)),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def _close_all(self) -> list[dict[str, Any]]:
        out = self._close_message()
        for index in self._open:
            entry = self._calls[index]
            item = entry["item"]
            item["status"] = "completed"
            out.append(self._event("response.function_call_arguments.done", item_id=item["id"],
                                   output_index=entry["index"], arguments=item["arguments"]))
            out.append(self._event("response.output_item.done", output_index=entry["index"], item=item))
        self._open.clear()
        return out

    def _response(self, status: str) -> dict[str, Any]:
        return {"id": self._id, "object": "response", "created_at": self._created, "status": status,
                "model": self._model, "output": [], "error": None, "incomplete_details": None,
                "instructions": None, "metadata": {}, "parallel_tool_calls": True, "tool_choice": "auto",
                "tools": [], "temperature": None, "top_p": None, "usage": None}

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


class ChatToMessages(_ChatChunkWriter):
    """Chat chunks → Anthropic Messages events, ``message_stop`` last (in ``finish``)."""

    def __init__(self) -> None:
        super().__init__()
        self._id = new_id("msg_")
        self._block: tuple[str, int] | None = None  # ("text", -1) or ("tool", chat call index)
        self._blocks = 0

    def _text(self, text: str) -> list[dict[str, Any]]:
        return [*self._open(("text", -1), {"type": "text", "text": ""}), self._delta({"type": "text_delta", "text": text})]

    def _tool_call(self, call: dict[str, Any]) -> list[dict[str, Any]]:
        function = call.get("function") or {}
        key = ("tool", int(call.get("index", 0)))
        out: list[dict[str, Any]] = []
        if self._block != key:
            out += self._open(key, {"type": "tool_use", "id": call.get("id") or new_id("toolu_"),
                                    "name": function.get("name") or "", "input": {}})
        if arguments := function.get("arguments"):
            out.append(self._delta({"type": "input_json_delta", "partial_json": arguments}))
        return out

    def finish(self) -> list[dict[str, Any]]:
        out = self._opening({})
        out += self._close()
        usage = {"input_tokens": self._usage.get("prompt_tokens", 0), "output_tokens": self._usage.get("completion_tokens", 0)}
        return out + [
            {"type": "message_delta", "delta": {"stop_reason": to_anthropic_stop(self._finish), "stop_sequence": None},
             "usage": usage},
            {"type": "message_stop"},
        ]

    def _start(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        message: dict[str, Any] = {
            "id": self._id, "type": "message", "role": "assistant", "model": chunk.get("model") or "unknown",
                   "content": [], "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": 0, "output_tokens": 0}}
        return [{"type": "message_start", "message": message}]

    def _open(self, key: tuple[str, int], block: dict[str, Any]) -> list[dict[str, Any]]:
        if self._block == key:
            return []
        out = self._close()
        self._block = key
        return out + [{"type": "content_block_start", "index": self._blocks, "content_block": block}]

    def _close(self) -> list[dict[str, Any]]:
        if self._block is None:
            return []
        self._block = None
        self._blocks += 1
        return [{"type": "content_block_stop", "index": self._blocks - 1}]

    def _delta(self, delta: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": self._blocks, "delta": delta}


def encode(api: str, event: ChatEvent) -> bytes:
    """One event as the SSE bytes of ``api``: chat as bare ``data:`` events, the others with
    an ``event:`` line naming the type, as their servers send them."""
    data = event if isinstance(event, str) else json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    if api == "chat" or isinstance(event, str):
        return f"data: {data}\n\n".encode()
    return f"event: {event['type']}\ndata: {data}\n\n".encode()
