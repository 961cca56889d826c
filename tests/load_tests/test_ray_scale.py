"""The replica load test's accounting: what counts as a completed, shed or timed-out check."""

from __future__ import annotations

import pytest

from load_tests.driver import StreamResult
from load_tests.ray_scale import summarise, table

pytestmark = pytest.mark.timeout(30)


def test_completed_checks_leave_out_skipped_shed_timed_out_and_failed_ones() -> None:
    results = [
        StreamResult(ttft=0.010, verdicts=["attributable", "skipped", "unverified (overload)", "contradictory"]),
        StreamResult(ttft=0.030, verdicts=["unverified (timeout)", "unverified (no evidence)",
                                           "unverified (error: TierUnavailable)"]),
        StreamResult(error="HTTP 429: too many streams"),
    ]
    run = summarise(2, 3, results, seconds=2.0)
    assert (run.requests, run.errors, run.checks) == (3, 1, 6)
    assert (run.completed, run.shed, run.timeouts) == (3, 1, 1)  # attributable, contradictory, no evidence
    assert run.completed_per_s == 1.5
    assert run.ttft_p50_ms == pytest.approx(10.0) and run.ttft_p99_ms == pytest.approx(30.0)
    lines = table([run]).splitlines()
    assert lines[0].startswith("| proxy replicas |") and lines[2].startswith("| 2 | 3 | 3 | 1 | 6 | 1.5 |")
