"""Check scheduling: load shedding when the queue for a check slot cannot finish inside the
budget, the slot-wait and per-sentence stage metrics, and the reason label of unverified
sentences."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import REGISTRY

from middleware.checking import CheckRunner, unverified_reason
from middleware.settings import CheckSettings
from middleware.types import CheckContext, Sentence, SentenceReport, Verdict
from tests.support.checkers import ScriptedChecker

SERVICE_S = 0.05
BUDGET_S = 0.5


def sentence(i: int) -> Sentence:
    return Sentence(index=i, start=0, end=10, text=f"Sentence {i}.")


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def warmed_runner(shed: bool) -> CheckRunner:
    """One global slot, a checker that holds it ``SERVICE_S``; the running mean learnt."""
    settings = CheckSettings(sentence_budget_s=BUDGET_S, max_checks_global=1, max_checks_per_stream=100,
                             shed_overload=shed)
    runner = CheckRunner(ScriptedChecker(delay=SERVICE_S), settings)
    checks = runner.session(CheckContext())
    for i in range(8):
        await checks.submit(sentence(i), [])
    return runner


async def burst(runner: CheckRunner, n: int) -> list[tuple[SentenceReport, float]]:
    """``n`` checks at once; each report with the seconds it took to arrive."""
    checks = runner.session(CheckContext())
    started = time.perf_counter()

    async def timed(i: int) -> tuple[SentenceReport, float]:
        report = await checks.submit(sentence(i), [])
        return report, time.perf_counter() - started

    return list(await asyncio.gather(*(timed(i) for i in range(n))))


async def test_a_burst_past_capacity_is_shed_at_once_instead_of_waiting_out_the_budget():
    runner = await warmed_runner(shed=True)
    assert runner.service_s is not None and 0.8 * SERVICE_S < runner.service_s < 3 * SERVICE_S
    shed_before = sample("factcheck_shed_checks_total")
    reason_before = sample("factcheck_sentences_total", verdict="unverified", reason="overload")
    results = await burst(runner, 30)
    shed = [(r, t) for r, t in results if r.verdict.reason == "overload"]
    # One slot, 50 ms a check, a 0.5 s budget: about ten can finish in time, the rest cannot.
    assert 10 <= len(shed) <= 25
    assert all(t < 0.1 for _, t in shed)  # told at once, not after the budget
    assert all(r.verdict.label == "unverified" for r, _ in shed)
    assert sample("factcheck_shed_checks_total") - shed_before == len(shed)
    assert sample("factcheck_sentences_total", verdict="unverified", reason="overload") - reason_before == len(shed)
    checked = [r for r, _ in results if r.verdict.label == "attributable"]
    assert len(checked) >= 5


async def test_without_shedding_the_same_burst_waits_and_times_out():
    runner = await warmed_runner(shed=False)
    results = await burst(runner, 30)
    assert not any(r.verdict.reason == "overload" for r, _ in results)
    timed_out = [(r, t) for r, t in results if r.verdict.reason == "timeout"]
    assert len(timed_out) >= 10 and all(t >= 0.9 * BUDGET_S for _, t in timed_out)


async def test_no_shedding_before_the_service_time_is_known_or_while_a_slot_is_free():
    settings = CheckSettings(sentence_budget_s=BUDGET_S, max_checks_global=4, max_checks_per_stream=100)
    runner = CheckRunner(ScriptedChecker(delay=SERVICE_S), settings)
    results = await burst(runner, 12)  # cold: nothing learnt yet, nothing shed
    assert not any(r.verdict.reason == "overload" for r, _ in results)
    assert not runner.overloaded(0.0)  # every slot free again


async def test_slot_wait_and_per_sentence_stage_times_are_observed():
    waits_before = sample("factcheck_check_slot_wait_seconds_count")
    stage_before = sample("factcheck_sentence_stage_seconds_count", stage="search")

    class Timed(ScriptedChecker):
        async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
            report = await super().check(sentence, context)
            return report.model_copy(update={"timings_ms": {"search": 12.0, "rerank": 3.0}})

    runner = CheckRunner(Timed(), CheckSettings())
    checks = runner.session(CheckContext())
    await asyncio.gather(*(checks.submit(sentence(i), []) for i in range(3)))
    assert sample("factcheck_check_slot_wait_seconds_count") - waits_before == 3
    assert sample("factcheck_sentence_stage_seconds_count", stage="search") - stage_before == 3


def test_unverified_reason_is_a_small_fixed_set():
    def reason(label: str, why: str | None) -> str:
        return unverified_reason(Verdict(label=label, reason=why))

    assert reason("attributable", "entailed (p=0.9)") == ""
    assert reason("unverified", "timeout") == "timeout"
    assert reason("unverified", "overload") == "overload"
    assert reason("unverified", "error: ValueError") == "error"
    assert reason("unverified", "no evidence") == "no_evidence"
    assert reason("unverified", "no_checker") == "no_checker"
    assert reason("unverified", "the LLM gave no parsable label") == "other"


async def test_a_stream_of_checks_can_have_its_own_budget():
    """A whole answer's checks (all submitted at once) get a budget of their own
    (``checked_stream.whole_answer_budget``); the per-sentence budget stays the default."""
    settings = CheckSettings(sentence_budget_s=0.35, max_checks_global=64, max_checks_per_stream=1)
    runner = CheckRunner(ScriptedChecker(delay=0.15), settings)
    warm = runner.session(CheckContext(), budget_s=10.0)
    await asyncio.gather(*(warm.submit(sentence(i), []) for i in range(8)))  # a check's service time learnt
    whole, streamed = runner.session(CheckContext(), budget_s=4 * 0.35), runner.session(CheckContext())
    answers = await asyncio.gather(asyncio.gather(*(whole.submit(sentence(i), []) for i in range(4))),
                                   asyncio.gather(*(streamed.submit(sentence(i), []) for i in range(4))))
    assert [r.verdict.label for r in answers[0]] == ["attributable"] * 4
    # the last two could not start in time to finish inside 0.35 s: shed (at 0.2 s), not timed out
    assert [r.verdict.reason for r in answers[1]] == [None, None, "overload", "overload"]


async def test_a_queued_check_is_shed_once_only_its_service_time_is_left():
    """A check still waiting for a slot when only one expected service time of its budget is
    left is shed then, not after waiting out the budget; only a check that started and ran
    past its budget times out."""
    runner = await warmed_runner(shed=True)
    slow = runner.session(CheckContext(), budget_s=0.3)
    holder = runner.session(CheckContext(), budget_s=10.0)
    held = holder.submit(sentence(0), [])  # holds the one slot for SERVICE_S
    await asyncio.sleep(0)
    runner.service_s = 0.25  # learnt: a check takes 0.25 s; behind one, this one starts too late
    started = time.perf_counter()
    report = await slow.submit(sentence(1), [])
    assert report.verdict.reason == "overload" and time.perf_counter() - started < 0.2
    await held


async def test_a_check_shed_at_submission_is_answered_there_and_never_reaches_the_checker():
    """Under overload the relay makes the report itself: a finished future, no task, nothing
    sent to the checker (the relay's event loop spends next to nothing on a shed sentence)."""
    runner = await warmed_runner(shed=True)
    checker = runner.checker
    assert isinstance(checker, ScriptedChecker)
    holder = runner.session(CheckContext(), budget_s=10.0)
    held = holder.submit(sentence(0), [])  # holds the one slot
    await asyncio.sleep(0)
    runner.service_s = 1.0  # learnt: a check takes 1 s; the 0.5 s budget cannot be met behind it
    seen = len(checker.seen)
    shed_before = sample("factcheck_shed_checks_total")
    shed = runner.session(CheckContext()).submit(sentence(1), [])
    assert not isinstance(shed, asyncio.Task) and shed.done()
    assert shed.result().verdict.reason == "overload"
    assert sample("factcheck_shed_checks_total") - shed_before == 1
    await held
    assert len(checker.seen) == seen  # only the holder's check ran


async def test_a_check_that_started_and_ran_past_its_budget_times_out():
    runner = CheckRunner(ScriptedChecker(delay=0.5), CheckSettings(sentence_budget_s=0.1))
    report = await runner.session(CheckContext()).submit(sentence(0), [])
    assert report.verdict.reason == "timeout"


def test_worker_slots_count_only_where_the_checks_run_in_workers() -> None:
    """``check.workers`` now defaults to ``auto`` (2 on two CPUs): a runner whose checks run in
    this process (the command line, LangChain, a checker given to the app) keeps
    ``max_checks_global`` slots; only the workers' pool is held to workers x worker_checks."""
    settings = CheckSettings(workers=2, worker_checks=4, max_checks_global=64)
    assert CheckRunner(ScriptedChecker(), settings).slots == 64
    assert CheckRunner(ScriptedChecker(), settings, in_workers=True).slots == 8
    assert CheckRunner(ScriptedChecker(), settings.model_copy(update={"workers": 0}), in_workers=True).slots == 64
