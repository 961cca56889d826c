"""The chat endpoint family's wire protocol: the JSON objects of its requests, streamed chunks,
``factcheck`` events and websocket messages, as pydantic models. ``/openapi.json`` is
generated from these models (``middleware.server.openapi``) and the tests validate what the
proxy sends against them, so the document cannot drift from the wire.

Only the request fields the proxy uses are validated; every other field is forwarded to the
upstream unchanged (``extra="allow"``). Reports and summaries are the shared types of
``middleware.types``; on the wire a passage's ``text`` comes once per response (see
``middleware.chat.wire``), which the generated schema says.

This module imports nothing of the project but ``middleware.types`` and the error format of
``middleware.errors``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    field_validator,
    model_serializer,
)

from pydantic.config import JsonDict

from middleware.errors import ErrorBody
from middleware.types import GroundingCorpus, Mode, SentenceReport, StreamSummary

# --------------------------------------------------------------------------------- request


class ContextDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    title: str | None = None
    source: str | None = None


class FactcheckOptions(BaseModel):
    """The request's ``factcheck`` field (stripped before forwarding). A bare string is a mode."""

    model_config = ConfigDict(extra="forbid")
    mode: Mode | None = None
    context: list[ContextDocument | str] = Field(default_factory=list, description="documents to check against")
    context_policy: Literal["only", "first", "among"] | None = None
    memory_check: StrictBool = False
    grounding_prompt: GroundingCorpus | None = Field(
        default=None,
        description="according-to prompting: the corpus the upstream is asked to ground its answer in "
        "('Wikipedia'), or 'off'; absent: the server default (check.grounding_prompt). The summary reports "
        "the instruction added",
    )


_CONTENT_PART: JsonDict = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"type": "string"}},
    "if": {"properties": {"type": {"const": "text"}}},
    "then": {"required": ["text"], "properties": {"text": {"type": "string"}}},
}


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[Any] | None = Field(
        default=None,
        json_schema_extra={"anyOf": [{"type": "string"}, {"type": "array", "items": _CONTENT_PART}, {"type": "null"}]},
    )

    @field_validator("content")
    @classmethod
    def _content_parts(cls, value: Any) -> Any:
        """Each part of a multi-part content is an object with a string ``type``; a text
        part's ``text`` is a string (other part types are the upstream's business)."""
        if isinstance(value, list):
            for i, part in enumerate(value):
                if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                    raise ValueError(f"content part {i} must be an object with a string 'type'")
                if part["type"] == "text" and not isinstance(part.get("text"), str):
                    raise ValueError(f"content part {i} of type 'text' needs a string 'text'")
        return value

    def text(self) -> str:
        """The message's text: a string, or the text parts of a multi-part content list."""
        if isinstance(self.content, str):
            return self.content
        if isinstance(self.content, list):
            return "\n".join(part["text"] for part in self.content if part["type"] == "text")
        return ""


class CheckedRequest(BaseModel):
    """A request to any front door: the API's own fields plus the optional ``factcheck`` field
    (a bare string is a mode)."""

    model_config = ConfigDict(extra="allow")
    stream: StrictBool = False
    factcheck: FactcheckOptions | None = None

    @field_validator("factcheck", mode="before")
    @classmethod
    def _mode_shorthand(cls, value: Any) -> Any:
        return {"mode": value} if isinstance(value, str) else value


class ChatRequest(CheckedRequest):
    """``POST /v1/chat/completions``: the OpenAI request plus the optional ``factcheck`` field."""

    model: str | None = None
    messages: list[Message] = Field(min_length=1)

    def last_user_message(self) -> str | None:
        for message in reversed(self.messages):
            if message.role == "user":
                return message.text()
        return None


# ---------------------------------------------------------------------- factcheck payloads


class SentenceEvent(BaseModel):
    """A sentence's report, sent as soon as its check finishes (correct mode: after its text)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["sentence"] = "sentence"
    report: SentenceReport


class SummaryEvent(BaseModel):
    """The message's summary, sent once after every report (before ``[DONE]``)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["summary"] = "summary"
    summary: StreamSummary


BlockReason = Literal["contradictory", "extrapolatory"]
"""The verdict that stops an answer in block mode (extrapolatory with ``check.block_extrapolatory``)."""


class BlockedEvent(BaseModel):
    """Block mode: the answer was stopped at this sentence. The client got the answer up to the
    sentence before; this event ends it (the face's withheld-content signal goes with it:
    ``finish_reason: "content_filter"``, ``response.incomplete``, ``stop_reason: "refusal"``),
    with the sentence's report and the summary of the sentences checked up to it."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["blocked"] = "blocked"
    reason: BlockReason
    report: SentenceReport
    summary: StreamSummary


FactcheckEvent = Annotated[SentenceEvent | SummaryEvent | BlockedEvent, Field(discriminator="type")]


class Blocked(BaseModel):
    """A non-stream answer stopped in block mode: its sentence (``reports[i].index``) and why."""

    model_config = ConfigDict(extra="forbid")
    index: int
    reason: BlockReason


class CompletionFactcheck(BaseModel):
    """The top-level ``factcheck`` object of a non-stream completion (``blocked``: block mode
    stopped the answer at that sentence; its text ends before it)."""

    model_config = ConfigDict(extra="forbid")
    reports: list[SentenceReport]
    summary: StreamSummary
    blocked: Blocked | None = None

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("blocked") is None:
            data.pop("blocked", None)
        return data


# ------------------------------------------------------------------------------ responses


class ChunkChoice(BaseModel):
    model_config = ConfigDict(extra="allow")
    index: int = 0
    delta: dict[str, Any] = Field(default_factory=dict)
    logprobs: Any = None
    finish_reason: str | None = None


class ChatChunk(BaseModel):
    """A ``chat.completion.chunk`` the proxy writes itself: correct mode's sentence text, or
    an extension chunk (empty delta) carrying a top-level ``factcheck`` event. Both parse as
    ordinary chunks with the official SDKs."""

    model_config = ConfigDict(extra="forbid")
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[ChunkChoice]
    factcheck: FactcheckEvent | None = None

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ("system_fingerprint", "factcheck"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


class ChatCompletion(BaseModel):
    """A non-stream response: the upstream's completion as it came, plus ``factcheck`` in
    annotate and correct mode (correct mode also replaces choice 0's content)."""

    model_config = ConfigDict(extra="allow")
    factcheck: CompletionFactcheck | None = None


class Health(BaseModel):
    status: Literal["ok"] = "ok"


# ------------------------------------------------------------------------------ websocket


UPSTREAM_APIS = ("chat", "responses", "messages")
"""The APIs an upstream may speak (``upstream.api``)."""


class WsChat(BaseModel):
    """Client → server: start an answer; ``request`` is a chat completions body."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["chat"]
    request: dict[str, Any]
    upstream_api: Literal["chat", "responses", "messages"] | None = Field(
        default=None, description="the API the proxy speaks to the upstream for this answer, where the upstream "
        "speaks several (the demo LLM speaks all three); absent: upstream.api")


class WsCancel(BaseModel):
    """Client → server: stop the answer in progress."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["cancel"]


WsClientMessage = Annotated[WsChat | WsCancel, Field(discriminator="type")]


class WsStart(BaseModel):
    """Server → client, first for each answer: the mode (the ``X-Factcheck-Mode`` header of HTTP)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["start"] = "start"
    mode: Mode


class WsDone(BaseModel):
    """Server → client, last for each chat message, whatever happened."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["done"] = "done"


WIRE_MODELS: tuple[type[BaseModel], ...] = (
    ErrorBody, ChatRequest, ChatChunk, ChatCompletion, CompletionFactcheck, SentenceEvent, SummaryEvent, BlockedEvent,
    Health, WsChat, WsCancel, WsStart, WsDone,
)
"""The models ``/openapi.json`` names under ``components.schemas``."""
