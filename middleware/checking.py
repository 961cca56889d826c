"""Running sentence checks beside a stream: bounded concurrency, per-sentence budgets, load
shedding, and reports that always arrive (a timeout, a failure or a shed check becomes an
``unverified`` report with its reason)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from middleware.interfaces import Checker
from middleware.metrics import CHECK_SLOT_WAIT, SENTENCE_STAGE_LATENCY, SENTENCES, SHED_CHECKS, STAGE_LATENCY
from middleware.settings import CheckSettings
from middleware.types import CheckContext, Mode, Sentence, SentenceReport, StreamSummary, Verdict

log = logging.getLogger(__name__)

SUMMARY_TIMEOUT_LOG_S = 60.0
"""Summarizer timeouts are logged at most once per this many seconds, with their count."""
SERVICE_TIME_WEIGHT = 0.2
"""Weight of the newest check in the running mean of how long a check holds its slot."""
MIN_SERVICE_SAMPLES = 8
"""Checks that must have finished before the running mean is trusted to shed load."""


class NoChecker:
    """The honest checker for when no pipeline is configured: every sentence is reported
    ``unverified`` with reason ``no_checker``."""

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        return unverified_report(sentence, "no_checker")


@runtime_checkable
class Summarizer(Protocol):
    """Optional checker capability: build the message-level summary (attribution report)."""

    async def summarize(self, reports: Sequence[SentenceReport], mode: Mode) -> StreamSummary: ...


def unverified_report(sentence: Sentence, reason: str) -> SentenceReport:
    return SentenceReport(
        index=sentence.index,
        start=sentence.start,
        end=sentence.end,
        text=sentence.text,
        verdict=Verdict(label="unverified", reason=reason),
    )


def unverified_reason(verdict: Verdict) -> str:
    """The ``reason`` label of the sentence counter: why a sentence is unverified (timeout,
    error, overload, no_evidence, no_checker, other), "" for a verdict."""
    if verdict.label != "unverified":
        return ""
    reason = verdict.reason or ""
    if reason in ("timeout", "overload", "no_checker"):
        return reason
    if reason.startswith("error"):
        return "error"
    return "no_evidence" if reason == "no evidence" else "other"


def basic_summary(reports: Sequence[SentenceReport], mode: Mode) -> StreamSummary:
    """Verdict counts and edits; the pipeline's summarizer adds the attribution report."""
    verdicts: dict[str, int] = {}
    for report in reports:
        verdicts[report.verdict.label] = verdicts.get(report.verdict.label, 0) + 1
    edits = [edit for report in reports for edit in report.edits] if mode is Mode.CORRECT else []
    return StreamSummary(sentences=len(reports), verdicts=verdicts, edits=edits, mode=mode)


class CheckRunner:
    """Process-wide: one checker, a global concurrency cap and the per-sentence budget."""

    def __init__(self, checker: Checker, settings: CheckSettings) -> None:
        self.checker = checker
        self.settings = settings
        self._global = asyncio.Semaphore(settings.max_checks_global)
        self.summary_timeouts = 0
        self._timeouts_logged_at: float | None = None
        self.waiting = 0
        """Checks waiting for a global slot now."""
        self.service_s: float | None = None
        """Running mean of how long a check holds its global slot (seconds)."""
        self._service_samples = 0

    def overloaded(self, remaining_s: float) -> bool:
        """Would a check that joins the queue now miss its budget? True when every slot is busy
        and the expected wait for a slot (the checks ahead, served ``max_checks_global`` at a
        time at the running mean service time) plus one service time exceeds ``remaining_s``."""
        if not self.settings.shed_overload or not self._global.locked():
            return False
        if self.service_s is None or self._service_samples < MIN_SERVICE_SAMPLES:
            return False
        rounds = (self.waiting + 1) / self.settings.max_checks_global
        return (rounds + 1) * self.service_s > remaining_s

    def record_service(self, seconds: float) -> None:
        self._service_samples += 1
        if self.service_s is None:
            self.service_s = seconds
        else:
            self.service_s += SERVICE_TIME_WEIGHT * (seconds - self.service_s)

    def for_stream(self, budget_s: float | None = None) -> StreamChecks:
        return StreamChecks(self, budget_s)

    async def summarize(self, reports: Sequence[SentenceReport], mode: Mode) -> StreamSummary:
        ordered = sorted(reports, key=lambda r: r.index)
        if isinstance(self.checker, Summarizer):
            try:
                return await asyncio.wait_for(self.checker.summarize(ordered, mode), self.settings.sentence_budget_s)
            except TimeoutError:  # expected under load: counted, not a traceback per stream
                self._count_summary_timeout()
            except Exception:  # the summary is best effort; the reports are already out
                log.exception("summarizer failed; sending basic summary")
        return basic_summary(ordered, mode)

    def _count_summary_timeout(self) -> None:
        """Count a summarizer timeout; log at WARNING on the first, then at most once per
        ``SUMMARY_TIMEOUT_LOG_S`` with the running count."""
        self.summary_timeouts += 1
        now = time.monotonic()
        if self._timeouts_logged_at is None or now - self._timeouts_logged_at >= SUMMARY_TIMEOUT_LOG_S:
            self._timeouts_logged_at = now
            log.warning("summarizer ran past the %.2f s budget (%d times so far); sending basic summaries",
                        self.settings.sentence_budget_s, self.summary_timeouts)


class StreamChecks:
    """The checks of one stream. ``submit`` returns a task that always resolves to a report;
    each check has ``budget_s`` (default: the per-sentence budget) from its submission."""

    def __init__(self, runner: CheckRunner, budget_s: float | None = None) -> None:
        self._runner = runner
        self._local = asyncio.Semaphore(runner.settings.max_checks_per_stream)
        self.budget_s = budget_s if budget_s is not None else runner.settings.sentence_budget_s
        self.tasks: list[asyncio.Task[SentenceReport]] = []

    def submit(self, sentence: Sentence, context: CheckContext) -> asyncio.Task[SentenceReport]:
        task = asyncio.create_task(self._run(sentence, context), name=f"check-{sentence.index}")
        self.tasks.append(task)
        return task

    async def _run(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        t0 = time.perf_counter()
        budget = self.budget_s
        try:
            async with asyncio.timeout(budget):
                async with self._local:
                    report = await self._check_in_slot(sentence, context, budget - (time.perf_counter() - t0))
        except TimeoutError:
            report = unverified_report(sentence, "timeout")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("check of sentence %d failed: %s", sentence.index, type(exc).__name__)
            report = unverified_report(sentence, f"error: {type(exc).__name__}")
        STAGE_LATENCY.labels(stage="check").observe(time.perf_counter() - t0)
        SENTENCES.labels(verdict=report.verdict.label, reason=unverified_reason(report.verdict)).inc()
        for stage, ms in report.timings_ms.items():
            SENTENCE_STAGE_LATENCY.labels(stage=stage).observe(ms / 1000.0)
        return report

    async def _check_in_slot(self, sentence: Sentence, context: CheckContext, remaining_s: float) -> SentenceReport:
        """The check, once a global slot is free; shed at once (``unverified``, reason
        ``overload``) when the queue for a slot would not let it finish inside its budget."""
        runner = self._runner
        if runner.overloaded(remaining_s):
            SHED_CHECKS.inc()
            return unverified_report(sentence, "overload")
        queued = time.perf_counter()
        runner.waiting += 1
        try:
            await runner._global.acquire()
        finally:
            runner.waiting -= 1
        started = time.perf_counter()
        CHECK_SLOT_WAIT.observe(started - queued)
        try:
            return await runner.checker.check(sentence, context)
        finally:
            runner._global.release()
            runner.record_service(time.perf_counter() - started)

    async def wait_all(self) -> list[SentenceReport]:
        if not self.tasks:
            return []
        return list(await asyncio.gather(*self.tasks))

    async def cancel_all(self) -> None:
        pending = [t for t in self.tasks if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
