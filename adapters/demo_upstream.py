"""A scripted upstream speaking chat completions (``POST /v1/chat/completions``), the OpenAI
Responses API (``POST /v1/responses``) and the Anthropic Messages API (``POST /v1/messages``):
the built-in demo LLM, and the mock used by tests and load_tests/. Each answer is scripted as
chat chunks; the other two APIs get them translated (``middleware.translation``).

What it answers, in order of precedence:
1. a ``mock`` object in the request body (tests send it through the proxy, which forwards
   unknown fields unchanged): ``{"text": ..., "token_rate": ..., "error_status": ...,
   "fail_after": n, "hang_after": n, "invalid_after": n, "closed_book_text": ..., "headers_delay": s,
   "big_event_after": n, "big_event_bytes": b, "surrogate_after": n, "redirect_to": url,
   "error_text": ...}`` (the last ones script the faults of a hostile probe)
   (``closed_book_text`` answers a request without system and tool messages: the proxy's
   closed-book call of the memory check);
2. the scripted demo answers (``demo_answers.yaml``) whose keywords match the last user message;
3. the default answer.
Text is streamed in word-piece sized tokens (at most 5 characters plus leading space), as
real models do, so the proxy's segmenter sees realistic splits.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml
from aiohttp import web

from middleware.translation.completions import translate_answer
from middleware.translation.requests import TO_CHAT
from middleware.translation.streams import ChatToMessages, ChatToResponses, Writer, encode

_TOKEN = re.compile(r"\s+\S{0,5}|\S{1,5}")
MODEL_NAME = "factcheck-demo"


@dataclass
class Script:
    """How to answer one request."""

    text: str
    token_rate: float = 0.0
    """Tokens per second; 0 sends as fast as possible."""
    error_status: int | None = None
    fail_after: int | None = None
    """Drop the connection after this many tokens."""
    hang_after: int | None = None
    """Stop sending (but keep the connection open) after this many tokens."""
    invalid_after: int | None = None
    """Send an event that is not JSON after this many tokens, then carry on."""
    first_token_delay: float = 0.0
    headers_delay: float = 0.0
    """Wait this long before sending the response headers."""
    big_event_after: int | None = None
    """Send one content event of ``big_event_bytes`` after this many tokens."""
    big_event_bytes: int = 9 * 1024 * 1024
    surrogate_after: int | None = None
    """Send a content delta holding a lone surrogate (JSON ``"\\ud800"``) after this many tokens."""
    redirect_to: str | None = None
    """Answer with a 307 redirect to this URL."""
    error_text: str | None = None
    """With ``error_status``: a plain-text error body instead of the OpenAI JSON error."""


@dataclass
class DemoAnswers:
    answers: list[dict[str, Any]] = field(default_factory=list)
    default_answer: str = "I can answer questions about the subjects in the demo corpus."

    @classmethod
    def load(cls) -> DemoAnswers:
        raw = resources.files("adapters").joinpath("demo_answers.yaml").read_text(encoding="utf-8")
        data = yaml.safe_load(raw) or {}
        return cls(answers=list(data.get("answers", [])), default_answer=data.get("default_answer", cls.default_answer))

    def answer_for(self, question: str) -> str:
        words = question.lower()
        best, best_hits = None, 0
        for entry in self.answers:
            hits = sum(1 for keyword in entry.get("keywords", []) if keyword.lower() in words)
            if hits > best_hits:
                best, best_hits = entry, hits
        return best["answer"] if best else self.default_answer


def tokenize(text: str) -> list[str]:
    """Word-piece sized tokens whose concatenation is ``text``."""
    return _TOKEN.findall(text)


class DemoUpstream:
    """The aiohttp application. ``requests`` records what it received, ``sent_tokens`` how
    many tokens of each streamed answer went out (for tests: a closed connection stops them)."""

    def __init__(self, answers: DemoAnswers | None = None, default_rate: float = 0.0) -> None:
        self.answers = answers
        self.default_rate = default_rate
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.sent_tokens: list[int] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_get("/v1/models", self.models)
        return app

    def script_for(self, body: dict[str, Any]) -> Script:
        mock = body.get("mock")
        if isinstance(mock, dict):
            mock = dict(mock)
            closed_book = mock.pop("closed_book_text", None)
            if closed_book is not None and not _has_context_messages(body):
                mock["text"] = closed_book
            return Script(**{"token_rate": self.default_rate, **mock})
        question = ""
        for message in reversed(body.get("messages") or []):
            if isinstance(message, dict) and message.get("role") == "user":
                question = str(message.get("content") or "")
                break
        answers = self.answers or DemoAnswers()
        return Script(text=answers.answer_for(question), token_rate=self.default_rate)

    async def models(self, request: web.Request) -> web.Response:
        self.headers.append(dict(request.headers))
        return web.json_response(
            {"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "factcheck"}]}
        )

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._answer(request, "chat")

    async def responses(self, request: web.Request) -> web.StreamResponse:
        return await self._answer(request, "responses")

    async def messages(self, request: web.Request) -> web.StreamResponse:
        return await self._answer(request, "messages")

    async def _answer(self, request: web.Request, api: str) -> web.StreamResponse:
        """The scripted answer in ``api``: the request read as a chat body (its ``mock`` kept)."""
        received = await request.json()
        self.requests.append(received)
        self.headers.append(dict(request.headers))
        body = TO_CHAT[api](received)
        if "mock" in received:
            body["mock"] = received["mock"]
        script = self.script_for(body)
        if script.headers_delay:
            await asyncio.sleep(script.headers_delay)
        if script.redirect_to:
            raise web.HTTPTemporaryRedirect(script.redirect_to)
        if script.error_status and script.error_text is not None:
            return web.Response(status=script.error_status, text=script.error_text)
        if script.error_status:
            message = f"scripted failure {script.error_status}"
            error: dict[str, Any] = (
                {"type": "error", "error": {"type": "api_error", "message": message}} if api == "messages"
                else {"error": {"message": message, "type": "server_error", "param": None, "code": None}})
            return web.json_response(
                error,
                status=script.error_status,
                headers={"Retry-After": "1"} if script.error_status == 429 else None,
            )
        model = body.get("model") or MODEL_NAME
        if not body.get("stream"):
            return web.json_response(translate_answer(_completion(script.text, model), "chat", api))
        return await self._stream(request, body, script, model, api)

    async def _stream(self, request: web.Request, body: dict[str, Any], script: Script, model: str,
                      api: str = "chat") -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        chunk_id, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

        writer: Writer | None = {"responses": ChatToResponses, "messages": ChatToMessages}.get(api, lambda: None)()

        async def send(payload: dict[str, Any] | str) -> None:
            if writer is not None and payload == "[DONE]":  # the other API closes its answer its own way
                await response.write(b"".join(encode(api, event) for event in writer.finish()))
                return
            if writer is not None and isinstance(payload, dict):  # the chunk as the other API's events
                await response.write(b"".join(encode(api, event) for event in writer.feed(payload)))
                return
            data = payload if isinstance(payload, str) else json.dumps(payload)
            await response.write(f"data: {data}\n\n".encode())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

        if script.first_token_delay:
            await asyncio.sleep(script.first_token_delay)
        await send(chunk({"role": "assistant", "content": ""}))
        tokens = tokenize(script.text)
        interval = 1.0 / script.token_rate if script.token_rate > 0 else 0.0
        answer = len(self.sent_tokens)
        self.sent_tokens.append(0)
        for i, token in enumerate(tokens):
            if script.fail_after is not None and i >= script.fail_after:
                request.transport.close()  # type: ignore[union-attr]
                return response
            if script.hang_after is not None and i >= script.hang_after:
                await asyncio.sleep(3600)
            if script.invalid_after is not None and i == script.invalid_after:
                await send("{not json")
            if script.big_event_after is not None and i == script.big_event_after:
                await send(chunk({"content": "x" * script.big_event_bytes}))
            if script.surrogate_after is not None and i == script.surrogate_after:
                await send(chunk({"content": "\ud800"}))  # json.dumps escapes it: valid JSON, invalid text
            await send(chunk({"content": token}))
            self.sent_tokens[answer] = i + 1
            if interval:
                await asyncio.sleep(interval)
        await send(chunk({}, "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 10, "completion_tokens": len(tokens), "total_tokens": 10 + len(tokens)}
            await send({"id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": model,
                        "choices": [], "usage": usage})
        await send("[DONE]")
        await response.write_eof()
        return response


def _has_context_messages(body: dict[str, Any]) -> bool:
    return any(isinstance(m, dict) and m.get("role") in ("system", "developer", "tool", "function")
               for m in body.get("messages") or [])


def _completion(text: str, model: str) -> dict[str, Any]:
    tokens = len(tokenize(text))
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": 10 + tokens},
    }
