"""A Runnable around a chat model that streams the model's answer fact-checked, the way the
proxy streams it:

- ``annotate``: the model's message chunks pass through unchanged and at once; a
  ``ReportEvent`` follows each sentence's check as soon as it is ready; a ``SummaryEvent`` ends
  the stream.
- ``correct``: each sentence is held until its check finishes (bounded by the budget) and
  sent as one ``AIMessageChunk``, corrected where the checker edited it, then its report.
- ``off``: the model's chunks only.

    checked = FactCheckedChatModel(model, checker)
    async for item in checked.astream("Who was Marie Curie?"):
        if isinstance(item, AIMessageChunk): print(item.text, end="")
        else: handle(item.factcheck)   # {"type": "sentence", "report": ...} or the summary

``ainvoke`` returns the whole ``AIMessage`` with ``response_metadata["factcheck"] =
{"reports": [...], "summary": {...}}`` (the proxy's non-stream shape). The mode can be set
per call with ``config={"configurable": {"factcheck_mode": "correct"}}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

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

from adapters.langchain.session import (
    FactCheckEvent,
    Held,
    ReportEvent,
    SummaryEvent,
    TextChecks,
    as_runner,
    check_context,
)
from middleware.checking import CheckRunner
from middleware.interfaces import Checker
from middleware.settings import CheckSettings
from middleware.types import Mode, SentenceReport

Item = BaseMessageChunk | FactCheckEvent


@dataclass(slots=True)
class _Failed:
    """The model's stream raised: re-raised to the consumer."""

    error: BaseException


class FactCheckedChatModel(Runnable[LanguageModelInput, Item]):
    def __init__(
        self,
        model: BaseChatModel,
        checker: Checker | CheckRunner,
        settings: CheckSettings | None = None,
        mode: Mode | str = Mode.ANNOTATE,
    ) -> None:
        self.model = model
        self.runner = as_runner(checker, settings)
        self.mode = Mode(mode)

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

    async def ainvoke(self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any) -> AIMessage:
        message: BaseMessageChunk | None = None
        reports: list[SentenceReport] = []
        summary: dict[str, Any] | None = None
        async for item in self.astream(input, config, **kwargs):
            if isinstance(item, ReportEvent):
                reports.append(item.report)
            elif isinstance(item, SummaryEvent):
                summary = item.summary.model_dump(mode="json")
            else:
                message = item if message is None else message + item
        result = message_chunk_to_message(message) if message is not None else AIMessage(content="")
        if reports or summary is not None:
            result.response_metadata["factcheck"] = {
                "reports": [r.model_dump(mode="json") for r in sorted(reports, key=lambda r: r.index)],
                "summary": summary,
            }
        return result  # type: ignore[return-value]

    def invoke(self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any) -> AIMessage:
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
        chunks = self.model.astream(input, config, **kwargs)
        if mode is Mode.OFF:
            async for chunk in chunks:
                yield chunk
            return
        context = check_context(_messages(input), mode)
        checks = TextChecks(self.runner, context)
        stream = _annotate(chunks, checks) if mode is Mode.ANNOTATE else _correct(chunks, checks)
        try:
            async for item in stream:
                yield item
        finally:
            await checks.cancel()


async def _annotate(chunks: AsyncIterator[BaseMessageChunk], checks: TextChecks) -> AsyncIterator[Item]:
    """Chunks at once; each report when ready; the summary last."""
    queue: asyncio.Queue[Item | _Failed | None] = asyncio.Queue()
    reports: list[SentenceReport] = []

    def on_done(task: asyncio.Task[SentenceReport]) -> None:
        if not task.cancelled():
            reports.append(task.result())
            queue.put_nowait(ReportEvent(task.result()))

    def watch(held: list[Held]) -> None:
        for item in held:
            if item.task is not None:
                item.task.add_done_callback(on_done)

    async def read() -> None:
        try:
            async for chunk in chunks:
                queue.put_nowait(chunk)
                watch(checks.feed(chunk.text))
            watch(checks.flush())
            await checks.wait()  # each check's on_done ran before wait_all's gather saw it finish
            queue.put_nowait(SummaryEvent(await checks.summary(reports)))
        except Exception as exc:
            queue.put_nowait(_Failed(exc))
        queue.put_nowait(None)

    async for item in _drain(queue, read()):
        yield item


async def _correct(chunks: AsyncIterator[BaseMessageChunk], checks: TextChecks) -> AsyncIterator[Item]:
    """Sentences held until checked, then sent (corrected) in order, each followed by its report."""
    queue: asyncio.Queue[Held | Item | _Failed | None] = asyncio.Queue()
    message_id: list[str | None] = [None]

    async def read() -> None:
        try:
            async for chunk in chunks:
                message_id[0] = message_id[0] or chunk.id
                text = chunk.text
                for held in checks.feed(text):
                    queue.put_nowait(held)
                if getattr(chunk, "chunk_position", None) == "last":
                    for held in checks.flush():
                        queue.put_nowait(held)
                rest = _without_text(chunk) if text else chunk
                if rest is not None:
                    queue.put_nowait(rest)
            for held in checks.flush():
                queue.put_nowait(held)
        except Exception as exc:
            queue.put_nowait(_Failed(exc))
        queue.put_nowait(None)

    reports: list[SentenceReport] = []
    async for item in _drain(queue, read()):
        if not isinstance(item, Held):
            yield item
            continue
        report = await item.task if item.task is not None else None
        text = report.corrected_text if report is not None and report.corrected_text is not None else item.segment.text
        if text:
            yield AIMessageChunk(content=text, id=message_id[0])
        if report is not None:
            reports.append(report)
            yield ReportEvent(report)
    yield SummaryEvent(await checks.summary(reports))


async def _drain(queue: asyncio.Queue[Any], reader: Any) -> AsyncIterator[Any]:
    """Run ``reader`` (which fills ``queue`` and ends it with None) and yield what it queues."""
    task = asyncio.create_task(reader)
    try:
        while (item := await queue.get()) is not None:
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)


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
