"""``ChatOpenAI`` for a model behind the fact-checking proxy, keeping the proxy's reports.

LangChain's ``ChatOpenAI`` reads only the OpenAI fields of a chunk or a completion, so the
proxy's ``factcheck`` objects (a sentence report or the summary on each extension chunk; the
reports and the summary on a non-stream completion) are dropped. ``ProxyChatOpenAI`` puts
them into the message's ``response_metadata["factcheck"]``:

- streamed (``stream``/``astream``): the extension chunks (empty content) carry
  ``{"reports": [report]}`` or ``{"summary": summary}``; adding the chunks up, as LangChain
  does for ``invoke`` on a streaming model, gives ``{"reports": [...], "summary": {...}}``
  with the reports in the order they arrived;
- not streamed (``invoke``/``ainvoke``): ``{"reports": [...], "summary": {...}}``.

Reports and summary are the proxy's JSON (``SentenceReport``, ``StreamSummary``), each passage
whole: the proxy sends a passage's text once per response and this puts it back where it
repeats (``middleware.chat.wire.ReceivedReports``).

    model = ProxyChatOpenAI(base_url="http://127.0.0.1:8000/v1", model="gpt-4o-mini",
                            extra_body={"factcheck": {"mode": "annotate"}})
    message = model.invoke("When did Marie Curie win her Nobel prizes?")
    message.response_metadata["factcheck"]["summary"]["verdicts"]
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI

from middleware.chat.wire import ReceivedReports

METADATA_KEY = "factcheck"


class ProxyChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` whose messages keep the proxy's reports in ``response_metadata["factcheck"]``."""

    def _convert_chunk_to_generation_chunk(
        self, chunk: dict[str, Any], default_chunk_class: type, base_generation_info: dict[str, Any] | None,
    ) -> ChatGenerationChunk | None:
        generation = super()._convert_chunk_to_generation_chunk(chunk, default_chunk_class, base_generation_info)
        event = chunk.get(METADATA_KEY)
        if generation is not None and isinstance(event, dict):
            generation.message.response_metadata[METADATA_KEY] = event  # made whole by _stream/_astream
        return generation

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        received = ReceivedReports()
        for generation in super()._stream(*args, **kwargs):
            yield _whole(generation, received)

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        received = ReceivedReports()
        async for generation in super()._astream(*args, **kwargs):
            yield _whole(generation, received)

    def _create_chat_result(self, response: dict[str, Any] | openai.BaseModel,
                            generation_info: dict[str, Any] | None = None) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        extra = response if isinstance(response, dict) else (response.model_extra or {})
        factcheck = extra.get(METADATA_KEY)
        if isinstance(factcheck, dict) and result.generations:
            received = ReceivedReports()  # the order the proxy rendered them in: reports, then the summary
            metadata: dict[str, Any] = {
                "reports": [received.report(r).model_dump(mode="json") for r in factcheck.get("reports") or []]}
            if factcheck.get("summary") is not None:
                metadata["summary"] = received.summary(factcheck["summary"]).model_dump(mode="json")
            result.generations[0].message.response_metadata[METADATA_KEY] = metadata
        return result


def _whole(generation: ChatGenerationChunk, received: ReceivedReports) -> ChatGenerationChunk:
    """An extension chunk's event as ``{"reports": [report]}`` or ``{"summary": summary}``,
    passages whole."""
    metadata = generation.message.response_metadata
    event = metadata.get(METADATA_KEY)
    if not isinstance(event, dict) or "type" not in event:
        return generation
    if event["type"] == "summary":
        metadata[METADATA_KEY] = {"summary": received.summary(event["summary"]).model_dump(mode="json")}
    else:
        metadata[METADATA_KEY] = {"reports": [received.report(event["report"]).model_dump(mode="json")]}
    return generation
