"""Running a request's sentence checks beside its stream: one ``CheckSession`` per request,
bounded concurrency (per request and in the process), per-sentence budgets, load shedding,
and reports that always arrive (a failure or a shed check becomes an ``unverified`` report
with its reason).

A check that cannot finish inside its budget is shed (reason ``overload``) as soon as that
is known: when it would join a queue whose expected wait exceeds what is left of its budget,
or when it is still waiting for a slot once only one service time is left. Only a check that
started and then ran past its budget is reported ``timeout``.

A check shed when it is submitted costs the relay almost nothing: its report is made there
and then (no task, nothing sent to a check worker), a finished future in place of the check's task. Under overload most sentences take this path,
and what the relay's event loop spends on each is what stands between a token and its
client."""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from collections.abc import Sequence

from middleware.interfaces import Checker, RequestChecks
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


class SentenceChecker(abc.ABC):
    """A checker that shares nothing between a request's checks: each sentence is checked
    with the request's context (``previous`` filled in); the summary is ``basic_summary``
    unless a subclass says more."""

    @abc.abstractmethod
    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport: ...

    async def summarize(self, reports: Sequence[SentenceReport], mode: Mode) -> StreamSummary:
        return basic_summary(reports, mode)

    def open(self, context: CheckContext, closed_book: asyncio.Future[str | None] | None = None) -> RequestChecks:
        return _SentenceChecks(self, context)


class _SentenceChecks:
    def __init__(self, checker: SentenceChecker, context: CheckContext) -> None:
        self.checker = checker
        self.context = context

    async def check(self, sentence: Sentence, previous: Sequence[str]) -> SentenceReport:
        return await self.checker.check(sentence, self.context.model_copy(update={"previous": list(previous)}))

    async def summarize(self, reports: Sequence[SentenceReport], mode: Mode) -> StreamSummary:
        return await self.checker.summarize(reports, mode)

    def close(self) -> None:
        pass


class NoChecker(SentenceChecker):
    """The honest checker for when no pipeline is configured: every sentence is reported
    ``unverified`` with reason ``no_checker``."""

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        return unverified_report(sentence, "no_checker")


async def check_sentence(checker: Checker, sentence: Sentence, context: CheckContext) -> SentenceReport:
    """One sentence checked on its own, in a request of its own (``context.previous``: the
    sentences before it): for evaluations and benchmarks, without budget or slots."""
    checks = checker.open(context)
    try:
        return await checks.check(sentence, context.previous)
    finally:
        checks.close()


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
    return StreamSummary.of_reports(reports, mode)


class CheckRunner:
    """Process-wide: one checker, a global concurrency cap and the per-sentence budget."""

    def __init__(self, checker: Checker, settings: CheckSettings, in_workers: bool = False) -> None:
        """``in_workers``: ``checker`` runs its checks in the check worker processes
        (``check.workers``), not in this process; it sets the number of slots."""
        self.checker = checker
        self.settings = settings
        self.slots = settings.check_slots(in_workers)
        self._global = asyncio.Semaphore(self.slots)
        self.summary_timeouts = 0
        self._timeouts_logged_at: float | None = None
        self.waiting = 0
        """Checks waiting for a global slot now."""
        self.service_s: float | None = None
        """Running mean of how long a check holds its global slot (seconds)."""
        self._service_samples = 0

    def session(self, context: CheckContext, closed_book: asyncio.Future[str | None] | None = None,
                budget_s: float | None = None) -> CheckSession:
        """One request's checks (see ``CheckSession``)."""
        return CheckSession(self, context, closed_book, budget_s)

    @property
    def expected_service_s(self) -> float | None:
        """The running mean service time, once enough checks have finished to trust it."""
        return self.service_s if self._service_samples >= MIN_SERVICE_SAMPLES else None

    def overloaded(self, remaining_s: float) -> bool:
        """Would a check that joins the queue now miss its budget? True when every slot is busy
        and the expected wait for a slot (the checks ahead, served ``slots`` at a
        time at the running mean service time) plus one service time exceeds ``remaining_s``."""
        service = self.expected_service_s
        if not self.settings.shed_overload or not self._global.locked() or service is None:
            return False
        rounds = (self.waiting + 1) / self.slots
        return (rounds + 1) * service > remaining_s

    async def acquire(self) -> None:
        """A global slot (counted in ``waiting`` while queued, the wait observed)."""
        queued = time.perf_counter()
        self.waiting += 1
        try:
            await self._global.acquire()
        finally:
            self.waiting -= 1
        CHECK_SLOT_WAIT.observe(time.perf_counter() - queued)

    def release(self, held_s: float) -> None:
        self._global.release()
        self._service_samples += 1
        if self.service_s is None:
            self.service_s = held_s
        else:
            self.service_s += SERVICE_TIME_WEIGHT * (held_s - self.service_s)

    async def summarize(self, checks: RequestChecks, reports: Sequence[SentenceReport], mode: Mode) -> StreamSummary:
        ordered = sorted(reports, key=lambda r: r.index)
        try:
            return await asyncio.wait_for(checks.summarize(ordered, mode), self.settings.sentence_budget_s)
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


_OVERLOAD_SENTENCES = SENTENCES.labels(verdict="unverified", reason="overload")
_CHECK_LATENCY = STAGE_LATENCY.labels(stage="check")


def _shed_report(sentence: Sentence, waited_s: float) -> SentenceReport:
    """A shed check's report, counted."""
    SHED_CHECKS.inc()
    _OVERLOAD_SENTENCES.inc()
    _CHECK_LATENCY.observe(waited_s)
    return unverified_report(sentence, "overload")


class _Shed(Exception):
    """The check cannot finish inside its budget: reported ``overload`` without running."""


class CheckSession:
    """One request's checks, built by the serving layer: the request's context (plain data),
    the checker's part of the request (``RequestChecks``: what its checks share, opened once,
    at ``start`` or the first sentence), the memory check's closed-book answer (an upstream
    call the request owns, cancelled by ``close``), the checks submitted and the reports
    that came back, from which the summary and attribution are built.

    ``submit`` returns a task that always resolves to a report; each check has ``budget_s``
    (default: the per-sentence budget) from its submission."""

    def __init__(self, runner: CheckRunner, context: CheckContext,
                 closed_book: asyncio.Future[str | None] | None = None, budget_s: float | None = None) -> None:
        self.runner = runner
        self.context = context
        self.closed_book = closed_book
        self.budget_s = budget_s if budget_s is not None else runner.settings.sentence_budget_s
        self.tasks: list[asyncio.Future[SentenceReport]] = []
        self.reports: list[SentenceReport] = []
        """The reports so far, as they finished."""
        self._local = asyncio.Semaphore(runner.settings.max_checks_per_stream)
        self._checks: RequestChecks | None = None

    @property
    def mode(self) -> Mode:
        return self.context.mode

    def start(self) -> RequestChecks:
        """Open the checker's part of the request (once): it starts reading what the checks
        share now, while the answer's first sentence is on its way."""
        if self._checks is None:
            self._checks = self.runner.checker.open(self.context, self.closed_book)
        return self._checks

    def submit(self, sentence: Sentence, previous: Sequence[str]) -> asyncio.Future[SentenceReport]:
        """The sentence's check: a task, or, when it is shed at once (``CheckRunner.overloaded``),
        a future that already holds its ``overload`` report."""
        task: asyncio.Future[SentenceReport]
        if self.runner.overloaded(self.budget_s):
            task = asyncio.get_running_loop().create_future()
            task.set_result(_shed_report(sentence, 0.0))
        else:
            task = asyncio.create_task(self._run(sentence, list(previous), self.start()), name=f"check-{sentence.index}")
        task.add_done_callback(self._record)
        self.tasks.append(task)
        return task

    async def wait_all(self) -> list[SentenceReport]:
        """Every report, in sentence order."""
        if not self.tasks:
            return []
        return list(await asyncio.gather(*self.tasks))

    async def summary(self, added_latency_ms: float | None = None,
                      reports: Sequence[SentenceReport] | None = None) -> StreamSummary:
        """The message's summary (attribution report included) from the reports so far, or
        from ``reports`` (block mode: those of the sentences up to the one that stopped it)."""
        summary = await self.runner.summarize(self.start(), self.reports if reports is None else reports, self.mode)
        return summary.model_copy(update={"added_latency_ms": added_latency_ms,
                                          "grounding_prompt": self.context.grounding_prompt})

    async def cancel(self) -> None:
        """Cancel the pending checks and wait until they are gone."""
        pending = [t for t in self.tasks if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    def close(self) -> None:
        """The request is over: cancel what still runs (checks, the closed-book call) and
        let the checker drop the request's state."""
        for task in self.tasks:
            task.cancel()
        if self.closed_book is not None:
            self.closed_book.cancel()
        if self._checks is not None:
            self._checks.close()

    def _record(self, task: asyncio.Future[SentenceReport]) -> None:
        """Recorded when done: correct mode's summary may precede a release."""
        if not task.cancelled() and task.exception() is None:
            self.reports.append(task.result())

    async def _run(self, sentence: Sentence, previous: list[str], checks: RequestChecks) -> SentenceReport:
        t0 = time.perf_counter()
        try:
            report = await self._check(sentence, previous, checks, t0 + self.budget_s)
        except _Shed:
            return _shed_report(sentence, time.perf_counter() - t0)
        except TimeoutError:
            report = unverified_report(sentence, "timeout")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("check of sentence %d failed: %s", sentence.index, type(exc).__name__)
            report = unverified_report(sentence, f"error: {type(exc).__name__}")
        _CHECK_LATENCY.observe(time.perf_counter() - t0)
        SENTENCES.labels(verdict=report.verdict.label, reason=unverified_reason(report.verdict)).inc()
        for stage, ms in report.timings_ms.items():
            SENTENCE_STAGE_LATENCY.labels(stage=stage).observe(ms / 1000.0)
        return report

    async def _check(self, sentence: Sentence, previous: list[str], checks: RequestChecks,
                     deadline: float) -> SentenceReport:
        """The check in its slots, under what is left of its budget once it starts."""
        await self._slots(deadline)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(deadline - started):
                return await checks.check(sentence, previous)
        finally:
            self._local.release()
            self.runner.release(time.perf_counter() - started)

    async def _slots(self, deadline: float) -> None:
        """Take this request's and the process's check slots, or raise ``_Shed`` when the
        check could not finish by ``deadline``: the queue ahead is too long (at once), or it
        is still waiting when only one expected service time is left. Without shedding
        (``check.shed_overload: false``) it waits up to the deadline and times out."""
        runner = self.runner
        shed = runner.settings.shed_overload
        if runner.overloaded(deadline - time.perf_counter()):
            raise _Shed
        service = (runner.expected_service_s or 0.0) if shed else 0.0
        try:
            async with asyncio.timeout(deadline - service - time.perf_counter()):
                await self._local.acquire()
                try:
                    await runner.acquire()
                except BaseException:
                    self._local.release()
                    raise
        except TimeoutError:
            if shed:
                raise _Shed from None
            raise
