"""What a front door speaking another API than chat completions (the OpenAI Responses API,
the Anthropic Messages API) shares: its request read as chat completions for the check
context and the mode, its body sent to the upstream in the upstream's API (translated where
the two differ), its stream checked on the one ``CheckedStream``, and its non-stream answer
checked whole. Each API's package (``middleware.responses``, ``middleware.messages``) says
how its request is validated and how its events are read (``ApiFaceService`` subclasses)."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from middleware.chat.checked_stream import CheckedStream, check_answer
from middleware.chat.grounding_prompt import add_grounding, requested_corpus
from middleware.chat.parsing import load_json, resolve_mode, validated
from middleware.chat.protocol import ChatRequest
from middleware.chat.serving import ChatService, completion_factcheck, stop
from middleware.chat.typed_events import TypedEvents
from middleware.errors import RequestError
from middleware.interfaces import Upstream, UpstreamStream
from middleware.metrics import ADDED_LATENCY, REQUESTS, TIME_TO_FIRST_TOKEN, UPSTREAM_LATENCY
from middleware.translation import completions, requests
from middleware.translation.upstream import upstream_for
from middleware.types import GroundingPrompt, Mode


E = TypeVar("E", bound=TypedEvents)


@dataclass(frozen=True, slots=True)
class FaceRequest:
    """A request at a front door: as chat completions (``chat``: context, options), the body
    to forward (the face's API, without ``factcheck``) and the mode."""

    chat: ChatRequest
    forward: dict[str, Any]
    mode: Mode

    @property
    def stream(self) -> bool:
        return bool(self.forward.get("stream"))

    def chat_body(self, api: str) -> dict[str, Any]:
        """The body as chat completions (what the memory check's closed-book call asks)."""
        body: dict[str, Any] = requests.TO_CHAT[api](self.forward)
        return body


class ApiFaceService(ABC, Generic[E]):
    """A front door of API ``API`` over the chat service's slots, checks and context, with its
    own view of the upstream (``upstream.api`` translated to ``API`` where they differ)."""

    API: ClassVar[str]
    REQUEST: ClassVar[type[BaseModel]]

    def __init__(self, chat: ChatService, upstream: Upstream) -> None:
        self.chat = chat
        self.settings = chat.settings
        self.upstream = upstream_for(upstream, self.settings.upstream.api, self.API)

    @abstractmethod
    def source(self, opened: UpstreamStream) -> E:
        """The face's ``AnswerSource`` over an upstream stream of its own API."""

    def read_request(self, raw: bytes, mode_header: str | None) -> FaceRequest:
        """A body read under the server's limits, validated as the face's request and read as
        chat completions; counted in ``factcheck_requests_total``."""
        server = self.settings.server
        body = load_json(raw, server.max_json_depth)
        if not isinstance(body, dict):
            raise RequestError("request body must be a JSON object", code="invalid_request")
        validated(self.REQUEST, body)
        forward = {key: value for key, value in body.items() if key != "factcheck"}
        as_chat = requests.TO_CHAT[self.API](forward)
        if len(as_chat["messages"]) > server.max_messages:
            raise RequestError(f"too many messages: at most {server.max_messages}", code="too_many_messages")
        messages = as_chat["messages"] or [{"role": "user", "content": ""}]  # nothing chat could read: no question
        chat = validated(ChatRequest, {**as_chat, "messages": messages, "factcheck": body.get("factcheck")})
        mode = resolve_mode(chat, mode_header, self.settings.check.default_mode)
        REQUESTS.labels(mode=mode.value, stream=str(chat.stream).lower()).inc()
        return FaceRequest(chat, forward, mode)

    def grounded(self, request: FaceRequest) -> tuple[dict[str, Any], GroundingPrompt | None]:
        """The body to send: as it came when no grounding instruction applies, else with the
        instruction added to it read as chat completions (fields chat completions has no place
        for are then dropped)."""
        option = request.chat.factcheck.grounding_prompt if request.chat.factcheck is not None else None
        corpus = requested_corpus(option, self.settings.check.grounding_prompt, request.mode)
        if corpus is None:
            return request.forward, None
        body, grounding = add_grounding(request.chat_body(self.API), corpus, self.settings.check.grounding_placement)
        return requests.FROM_CHAT[self.API](body), grounding

    @asynccontextmanager
    async def open_stream(
        self, request: FaceRequest, headers: Mapping[str, str], started: float
    ) -> AsyncIterator[tuple[CheckedStream[Any], E]]:
        """The checked stream and its source (see ``ChatService.open_checked``)."""
        body, grounding = self.grounded(request)
        async with self.chat.open_checked(request.chat, request.chat_body(self.API), body, grounding, request.mode,
                                          headers, started, self.upstream, self.source) as opened:
            yield opened

    async def complete(self, request: FaceRequest, headers: Mapping[str, str]) -> bytes | dict[str, Any]:
        """A non-stream answer: the upstream's bytes as they came (off mode, or no text), else
        its JSON with the top-level ``factcheck`` object (correct mode: its text corrected)."""
        body, grounding = self.grounded(request)
        context = await self.chat.request_context(request.chat, request.mode, grounding)
        closed_book = self.chat.closed_book(request.chat, context, request.chat_body(self.API), headers)
        try:
            t0 = time.perf_counter()
            raw, answer = await self.upstream.complete(body, headers)
            upstream_done = time.perf_counter()
            TIME_TO_FIRST_TOKEN.labels(mode=request.mode.value).observe(upstream_done - t0)
            UPSTREAM_LATENCY.labels(stream="false").observe(upstream_done - t0)
            text = completions.answer_text(answer, self.API) if request.mode is not Mode.OFF else None
            if text is None:
                return raw
            checked = await check_answer(self.chat.runner, text, context, closed_book)
            if request.mode is Mode.CORRECT or checked.blocked is not None:
                completions.replace_text(answer, self.API, checked.text)
            if checked.blocked is not None:
                completions.withhold(answer, self.API)
            answer["factcheck"] = completion_factcheck(checked)
            ADDED_LATENCY.labels(mode=request.mode.value).observe(time.perf_counter() - upstream_done)
            return answer
        finally:
            stop(closed_book)
