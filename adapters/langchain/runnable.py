"""A Runnable around a chat model that streams the model's answer fact-checked: the proxy's
checked stream (``middleware.chat.checked_stream``) over the model's message chunks.

- ``annotate``: the model's message chunks pass through unchanged and at once; a
  ``ReportEvent`` follows each sentence's check as soon as it is ready; a ``SummaryEvent`` ends
  the stream.
- ``correct``: each sentence is held until its check finishes (bounded by the budget) and
  sent as one ``AIMessageChunk``, corrected where the checker edited it, then its report.
- ``block``: held as in ``correct`` mode and sent as written, until a sentence is judged
  contradictory (or extrapolatory, ``check.block_extrapolatory``): the model's stream is
  closed there, and by ``on_block`` the stream raises ``FactCheckBlocked`` (``"raise"``, the
  default: its ``text`` is the answer up to the sentence before, with the sentence's
  ``report`` and ``reason``) or ends with a ``BlockedEvent`` (``"truncate"``: ``ainvoke``
  then returns the truncated message, ``response_metadata["finish_reason"] ==
  "content_filter"`` and ``response_metadata["factcheck"]["blocked"]``).
- ``off``: the model's chunks only.

    checked = FactCheckedChatModel(model, checker)
    async for item in checked.astream("Who was Marie Curie?"):
        if isinstance(item, AIMessageChunk): print(item.text, end="")
        else: handle(item.model_dump(mode="json"))   # the proxy's factcheck object: sentence or summary

``ainvoke`` returns the whole ``AIMessage`` with ``response_metadata["factcheck"] =
{"reports": [...], "summary": {...}}`` (the proxy's non-stream shape). The mode can be set
per call with ``config={"configurable": {"factcheck_mode": "correct"}}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForChainRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    BaseMessageChunk,
    HumanMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig

from adapters.langchain.session import FactCheckBlocked, FactCheckEvent, as_runner, call_context
from middleware.chat.checked_stream import CheckedStream, End, Failed, Forward, Text
from middleware.chat.protocol import Blocked, BlockedEvent, CompletionFactcheck, SentenceEvent, SummaryEvent
from middleware.checking import CheckRunner
from middleware.interfaces import Checker
from middleware.settings import CheckSettings
from middleware.translation.streams import WITHHELD
from middleware.types import CheckContext, Mode, SentenceReport, StreamSummary

Item = BaseMessageChunk | FactCheckEvent
OnBlock = Literal["raise", "truncate"]


class FactCheckedChatModel(Runnable[LanguageModelInput, Item]):
    def __init__(
        self,
        model: BaseChatModel,
        checker: Checker | CheckRunner,
        settings: CheckSettings | None = None,
        mode: Mode | str = Mode.ANNOTATE,
        on_block: OnBlock = "raise",
    ) -> None:
        """``on_block`` (block mode): raise ``FactCheckBlocked``, or end with the truncated answer."""
        if on_block not in ("raise", "truncate"):
            raise ValueError(f"on_block must be 'raise' or 'truncate', not {on_block!r}")
        self.model = model
        self.runner = as_runner(checker, settings)
        self.mode = Mode(mode)
        self.on_block = on_block

    def get_name(self, suffix: str | None = None, *, name: str | None = None) -> str:
        return super().get_name(suffix, name=name or f"FactChecked{self.model.get_name()}")

    # ------------------------------------------------------------ Runnable API
    async def astream(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Item]:
        async def one() -> AsyncIterator[LanguageModelInput]:
            yield input

        async for item in self._atransform_stream_with_config(one(), self._checked, config, **kwargs):
            yield item

    async def ainvoke(  # type: ignore[override]  # streams items, returns the whole message
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AIMessage:
        message: BaseMessageChunk | None = None
        reports: list[SentenceReport] = []
        summary: StreamSummary | None = None
        blocked: Blocked | None = None
        async for item in self.astream(input, config, **kwargs):
            if isinstance(item, SentenceEvent):
                reports.append(item.report)
            elif isinstance(item, SummaryEvent):
                summary = item.summary
            elif isinstance(item, BlockedEvent):
                reports.append(item.report)
                summary, blocked = item.summary, Blocked(index=item.report.index, reason=item.reason)
            else:
                message = item if message is None else message + item
        result = message_chunk_to_message(message) if message is not None else AIMessage(content="")
        if summary is not None:
            factcheck = CompletionFactcheck(reports=sorted(reports, key=lambda r: r.index), summary=summary,
                                            blocked=blocked)
            result.response_metadata["factcheck"] = factcheck.model_dump(mode="json")
        if blocked is not None:
            result.response_metadata["finish_reason"] = WITHHELD
        return result  # type: ignore[return-value]

    def invoke(  # type: ignore[override]  # streams items, returns the whole message
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AIMessage:
        """Synchronous use runs the async path on a new event loop (not from inside a running loop)."""
        return asyncio.run(self.ainvoke(input, config, **kwargs))

    # ------------------------------------------------------------ streaming logic
    async def _checked(
        self,
        inputs: AsyncIterator[LanguageModelInput],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
        **kwargs: Any,
    ) -> AsyncIterator[Item]:
        input = await anext(aiter(inputs))
        mode = Mode((config.get("configurable") or {}).get("factcheck_mode", self.mode))
        source = _ModelChunks(self.model.astream(input, config, **kwargs))
        context = call_context(_messages(input), mode) if mode is not Mode.OFF else CheckContext(mode=mode)
        session = self.runner.session(context)
        sent: list[str] = []
        try:
            async for event in CheckedStream(source, session).run():
                if isinstance(event, Forward):
                    sent.append(event.item.text)
                    yield event.item
                elif isinstance(event, Text):
                    sent.append(event.text)
                    yield AIMessageChunk(content=event.text, id=source.message_id)
                elif isinstance(event, Failed):
                    raise event.error
                elif isinstance(event, BlockedEvent) and self.on_block == "raise":
                    raise FactCheckBlocked("".join(sent), event.report, event.reason, event.summary)
                elif not isinstance(event, End):
                    yield event
        finally:
            session.close()


class _ModelChunks:
    """A chat model's stream as the checked stream's ``AnswerSource``."""

    def __init__(self, chunks: AsyncIterator[BaseMessageChunk]) -> None:
        self._chunks = chunks
        self.message_id: str | None = None

    async def items(self) -> AsyncIterator[BaseMessageChunk]:
        async for chunk in self._chunks:
            self.message_id = self.message_id or chunk.id
            yield chunk

    def passthrough(self) -> AsyncIterator[BaseMessageChunk]:
        return self.items()

    def split(self, item: BaseMessageChunk) -> list[BaseMessageChunk]:
        return [item]

    def may_end(self, item: BaseMessageChunk) -> bool:
        return False

    def text(self, item: BaseMessageChunk) -> str:
        return item.text

    def ends_message(self, item: BaseMessageChunk) -> bool:
        return getattr(item, "chunk_position", None) == "last"

    def is_end(self, item: BaseMessageChunk) -> bool:
        return False

    def without_text(self, item: BaseMessageChunk) -> BaseMessageChunk | None:
        return _without_text(item)


def _without_text(chunk: BaseMessageChunk) -> BaseMessageChunk | None:
    """Correct mode: the chunk minus its text, or None when nothing else is in it."""
    content = chunk.content
    kept = [] if isinstance(content, str) else [
        part for part in content if not (isinstance(part, str) or part.get("type") == "text")
    ]
    carries = bool(kept) or bool(chunk.additional_kwargs) or getattr(chunk, "chunk_position", None) is not None
    if isinstance(chunk, AIMessageChunk):
        carries = carries or bool(chunk.tool_call_chunks) or chunk.usage_metadata is not None
    return chunk.model_copy(update={"content": kept if kept else ""}) if carries else None


def _messages(input: LanguageModelInput) -> Sequence[BaseMessage]:
    if isinstance(input, PromptValue):
        return input.to_messages()
    if isinstance(input, str):
        return [HumanMessage(content=input)]
    return convert_to_messages(input)
