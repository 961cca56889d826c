"""The Responses API's wire models as the proxy reads and writes them. Only the request fields
the proxy uses are validated; the rest is forwarded unchanged. Errors are the OpenAI error
format (``middleware.errors.ErrorBody``) over HTTP, an ``error`` event in a stream."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from middleware.chat.protocol import CheckedRequest, CompletionFactcheck, FactcheckEvent


class ResponsesRequest(CheckedRequest):
    """``POST /v1/responses``: the OpenAI request plus the optional ``factcheck`` field."""

    model: str | None = None
    input: str | list[dict[str, Any]] | None = Field(
        default=None, description="a string (one user message) or a list of input items")
    instructions: str | None = None


class ResponseTextDelta(BaseModel):
    """Correct mode: a sentence's text, as the upstream's text deltas are."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[Any] = Field(default_factory=list)


class ResponseFactcheck(BaseModel):
    """An extension event (``event: response.factcheck``) carrying a ``factcheck`` event: a
    sentence's report, or the summary (before ``response.completed``). Its
    ``sequence_number`` repeats the last upstream event's."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["response.factcheck"] = "response.factcheck"
    sequence_number: int
    factcheck: FactcheckEvent


class ResponseErrorEvent(BaseModel):
    """A stream that broke off ends with this event, as the Responses API's own do."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["error"] = "error"
    sequence_number: int
    code: str | None = None
    message: str
    param: str | None = None


class ResponseObject(BaseModel):
    """A non-stream response: the upstream's as it came, plus ``factcheck`` in annotate and
    correct mode (correct mode also corrects its output text)."""

    model_config = ConfigDict(extra="allow")
    factcheck: CompletionFactcheck | None = None


WIRE_MODELS: tuple[type[BaseModel], ...] = (
    ResponsesRequest, ResponseTextDelta, ResponseFactcheck, ResponseErrorEvent, ResponseObject)
