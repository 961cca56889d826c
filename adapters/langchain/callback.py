"""An async LangChain callback handler that fact-checks what a model streams.

Tokens from ``on_llm_new_token`` are buffered into sentences; each sentence is checked
beside the stream by the same checker, budget and concurrency caps the proxy uses; every
``SentenceReport`` goes to ``on_report`` and to the handler's async iterator as soon as it
is ready. A model called without streaming is checked from ``on_llm_end``'s text.

    handler = FactCheckCallbackHandler(checker, on_report=print)
    async for chunk in model.astream(question, config={"callbacks": [handler]}):
        ...
    async for report in handler:   # ends when the checks of every started run are done
        ...

In block mode the first report of a run that would stop the proxy's answer (contradictory, or
extrapolatory with ``check.block_extrapolatory``) goes to ``on_block(report, reason)`` as well,
is kept in ``blocked`` (by run id) and counted in ``factcheck_blocks_total``; the checks are
beside the stream, so the handler cannot withhold what the model already streamed: the caller
stops or discards it (``FactCheckedChatModel`` in block mode withholds it).

Use it with the async APIs (``astream``/``ainvoke``): the checks are tasks on the running loop.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.outputs import ChatGenerationChunk, GenerationChunk, LLMResult

from adapters.langchain.session import FactCheckBlocked, as_runner, call_context
from middleware.chat.checked_stream import CheckedText, Held, block_reason
from middleware.chat.protocol import BlockReason
from middleware.checking import CheckRunner
from middleware.interfaces import Checker
from middleware.metrics import BLOCKS
from middleware.settings import CheckSettings
from middleware.types import CheckContext, Mode, SentenceReport, StreamSummary

log = logging.getLogger(__name__)

OnReport = Callable[[SentenceReport], Awaitable[None] | None]
OnBlock = Callable[[SentenceReport, BlockReason], Awaitable[None] | None]


@dataclass
class _Run:
    checks: CheckedText
    deliveries: list[asyncio.Task[SentenceReport | None]] = field(default_factory=list)
    streamed: bool = False
    text: list[str] = field(default_factory=list)
    """What the model sent, for the text before a blocked sentence."""


class FactCheckCallbackHandler(AsyncCallbackHandler):
    """Checks every LLM run it is attached to. ``reports`` and ``summaries`` (by run id)
    keep everything found; iterate the handler for reports as they arrive."""

    def __init__(
        self,
        checker: Checker | CheckRunner,
        settings: CheckSettings | None = None,
        *,
        on_report: OnReport | None = None,
        mode: Mode | str = Mode.ANNOTATE,
        wait_on_end: bool = False,
        on_block: OnBlock | None = None,
    ) -> None:
        """``wait_on_end``: hold ``on_llm_end`` (and so the end of the model call) until
        every check of the run has reported and the summary is made. ``on_block`` (block
        mode): called with the report and the reason of the sentence that blocks a run."""
        self._runner = as_runner(checker, settings)
        self._on_report = on_report
        self._on_block = on_block
        self.blocked: dict[UUID, FactCheckBlocked] = {}
        """Block mode: each blocked run's block (the text before the sentence, its report, the reason)."""
        self.mode = Mode(mode)
        self.wait_on_end = wait_on_end
        self.reports: list[SentenceReport] = []
        self.summaries: dict[UUID, StreamSummary] = {}
        self._runs: dict[UUID, _Run] = {}
        self._finishing: set[asyncio.Task[None]] = set()
        self._queue: asyncio.Queue[SentenceReport | None] = asyncio.Queue()

    # ------------------------------------------------------------ LangChain callbacks
    async def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._start(run_id, call_context(messages[0] if messages else [], self.mode))

    async def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any) -> None:
        self._start(run_id, call_context([HumanMessage(content=prompts[-1])] if prompts else [], self.mode))

    async def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: GenerationChunk | ChatGenerationChunk | None = None,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        run = self._runs.get(run_id)
        if run is None:
            return
        run.streamed = True
        text = _token_text(token, chunk)
        run.text.append(text)
        self._deliver(run_id, run, run.checks.feed(text))

    async def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._runs.pop(run_id, None)
        if run is None:
            return
        if not run.streamed and response.generations and response.generations[0]:
            run.text.append(response.generations[0][0].text)
            self._deliver(run_id, run, run.checks.feed(run.text[-1]))
        self._deliver(run_id, run, run.checks.flush())
        finishing = asyncio.create_task(self._finish(run_id, run), name=f"factcheck-finish-{run_id}")
        self._finishing.add(finishing)
        finishing.add_done_callback(self._finishing.discard)
        if self.wait_on_end:
            await finishing

    async def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._runs.pop(run_id, None)
        if run is not None:
            await _close(run)
            await asyncio.gather(*run.deliveries, return_exceptions=True)
            self._close_if_idle()

    # ------------------------------------------------------------ consumers
    def __aiter__(self) -> AsyncIterator[SentenceReport]:
        return self.iter_reports()

    async def iter_reports(self) -> AsyncIterator[SentenceReport]:
        """Reports as they arrive, until every run started so far has ended and been checked."""
        while (report := await self._queue.get()) is not None:
            yield report

    async def wait(self) -> None:
        """Until the checks of every ended run have reported."""
        while self._finishing:
            await asyncio.gather(*list(self._finishing), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel every check in flight."""
        runs, self._runs = list(self._runs.values()), {}
        for run in runs:
            await _close(run)
        for task in list(self._finishing):
            task.cancel()
        await asyncio.gather(*self._finishing, return_exceptions=True)
        self._queue.put_nowait(None)

    # ------------------------------------------------------------ internals
    def _start(self, run_id: UUID, context: CheckContext) -> None:
        self._runs[run_id] = _Run(CheckedText(self._runner.session(context)))

    def _deliver(self, run_id: UUID, run: _Run, held: list[Held]) -> None:
        for item in held:
            if item.task is not None:
                run.deliveries.append(asyncio.create_task(self._report(run_id, run, item.task)))

    async def _report(self, run_id: UUID, run: _Run, check: asyncio.Future[SentenceReport]) -> SentenceReport | None:
        report = await check
        self.reports.append(report)
        await _call(self._on_report, "on_report", report)
        if self.mode is Mode.BLOCK and (reason := block_reason(report, self._runner.settings)) is not None:
            await self._block(run_id, run, report, reason)
        self._queue.put_nowait(report)
        return report

    async def _block(self, run_id: UUID, run: _Run, report: SentenceReport, reason: BlockReason) -> None:
        """The run's first blocking report (the first to finish: checks run concurrently)."""
        if run_id in self.blocked:
            return
        BLOCKS.labels(verdict=reason).inc()
        self.blocked[run_id] = FactCheckBlocked("".join(run.text)[: report.start], report, reason)
        await _call(self._on_block, "on_block", report, reason)

    async def _finish(self, run_id: UUID, run: _Run) -> None:
        try:
            await asyncio.gather(*run.deliveries)
            self.summaries[run_id] = await run.checks.session.summary()
        finally:
            await _close(run)
            self._close_if_idle(exclude=asyncio.current_task())

    def _close_if_idle(self, exclude: asyncio.Task[Any] | None = None) -> None:
        busy = self._runs or any(task is not exclude and not task.done() for task in self._finishing)
        if not busy:
            self._queue.put_nowait(None)


async def _call(callback: Callable[..., Awaitable[None] | None] | None, name: str, report: SentenceReport,
                *args: Any) -> None:
    """A user callback, awaited if it is async; its failure is logged, never raised into the run."""
    if callback is None:
        return
    try:
        result = callback(report, *args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("%s callback failed for sentence %d", name, report.index)


async def _close(run: _Run) -> None:
    """The run is over: its checks cancelled if still running, its session closed."""
    await run.checks.session.cancel()
    run.checks.session.close()


def _token_text(token: str | list[str | dict[str, Any]], chunk: GenerationChunk | ChatGenerationChunk | None) -> str:
    """The text of a new token (content blocks: their text parts)."""
    if isinstance(token, str):
        return token
    if chunk is not None:
        return chunk.text
    return "".join(part if isinstance(part, str) else str(part.get("text", "")) for part in token)
