"""A checker on the Ray Serve tier (``runtime.backend: ray``) that never reads a tier outage as
an answer nothing supports."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from middleware.checking import unverified_report
from middleware.interfaces import Checker, RequestChecks
from middleware.runtime.ray_client import TierUnavailable, tier_failures
from middleware.types import CheckContext, Mode, Sentence, SentenceReport, StreamSummary


class TierGuardedChecker:
    """The checker of a proxy on the tier (``middleware.composition`` adds it with
    ``runtime.backend: ray``): a check during which a call to the tier failed is reported
    ``unverified`` (reason ``error: TierUnavailable``). Without it, a tier outage would read as
    an answer nothing supports: the evidence sources log a failed search and return no passages,
    and the verifier would call the sentence extrapolatory. Any failure in the process during
    the check counts (an outage hits every check alike)."""

    def __init__(self, checker: Checker) -> None:
        self.checker = checker

    def open(self, context: CheckContext, closed_book: asyncio.Future[str | None] | None = None) -> RequestChecks:
        return _TierGuardedChecks(self.checker.open(context, closed_book))


class _TierGuardedChecks:
    def __init__(self, checks: RequestChecks) -> None:
        self.checks = checks

    async def check(self, sentence: Sentence, previous: Sequence[str]) -> SentenceReport:
        failures = tier_failures()
        report = await self.checks.check(sentence, previous)
        if tier_failures() != failures:
            return unverified_report(sentence, f"error: {TierUnavailable.__name__}")
        return report

    async def summarize(self, reports: Sequence[SentenceReport], mode: Mode) -> StreamSummary:
        return await self.checks.summarize(reports, mode)

    def close(self) -> None:
        self.checks.close()
