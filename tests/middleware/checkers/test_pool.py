"""Check worker processes (``check.workers``): a request's checks run in the worker it is
pinned to, at a lower scheduling priority than the relay; cancellations reach the worker; a
worker that dies fails its checks as ``unverified`` instead of hanging the stream, and is
replaced; and the pipeline in a worker gives the reports it gives in the relay's process."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from middleware.checkers.pool import WorkerPool
from middleware.checking import CheckRunner
from middleware.composition import build_checker
from middleware.settings import load_settings
from middleware.types import CheckContext, Mode, Sentence

pytestmark = pytest.mark.timeout(300)


def sentence(i: int, text: str = "Marie Curie was born in Warsaw in 1867.") -> Sentence:
    return Sentence(index=i, start=0, end=len(text), text=text)


async def started_pool(workers: int, **overrides: object) -> tuple[WorkerPool, CheckRunner]:
    settings = load_settings(**{"check.checker": "none", "check.workers": workers, **overrides})
    pool = WorkerPool(settings, build_checker)
    await pool.start()
    return pool, CheckRunner(pool, settings.check, in_workers=True)


async def test_requests_are_pinned_to_the_least_busy_worker_which_runs_niced():
    pool, runner = await started_pool(2)
    try:
        first, second = runner.session(CheckContext()), runner.session(CheckContext())
        reports = await asyncio.gather(first.submit(sentence(0), []), second.submit(sentence(1), []))
        assert [r.verdict.reason for r in reports] == ["no_checker", "no_checker"]  # NoChecker, in the workers
        assert sorted(w.requests for w in pool.workers) == [1, 1]  # one request each
        summary = await first.summary()
        assert summary.verdicts == {"unverified": 1}
        first.close()
        second.close()
        assert [w.requests for w in pool.workers] == [0, 0]
        for worker in pool.workers:
            assert worker.pid is not None and worker.pid != os.getpid()
            threads = [int(tid) for tid in os.listdir(f"/proc/{worker.pid}/task")]
            assert len(threads) > 1  # the imports' threads too: each is set, not only the main one
            for tid in threads:
                assert os.getpriority(os.PRIO_PROCESS, tid) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10)
                assert os.sched_getscheduler(tid) == os.SCHED_IDLE
    finally:
        await pool.close()


async def test_without_worker_idle_the_workers_keep_the_normal_policy():
    pool, _ = await started_pool(1, **{"check.worker_idle": False})
    try:
        pid = pool.workers[0].pid
        assert pid is not None
        assert all(os.sched_getscheduler(int(tid)) == os.SCHED_OTHER for tid in os.listdir(f"/proc/{pid}/task"))
    finally:
        await pool.close()


async def test_a_dead_worker_fails_its_checks_and_the_next_request_goes_elsewhere():
    pool, runner = await started_pool(2)
    try:
        doomed = runner.session(CheckContext())
        await doomed.submit(sentence(0), [])
        victim = next(w for w in pool.workers if w.requests == 1)
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        while victim.alive:
            await asyncio.sleep(0.01)
        report = await doomed.submit(sentence(1), [])
        assert (report.verdict.label, report.verdict.reason) == ("unverified", "error: WorkerGone")
        doomed.close()
        fresh = runner.session(CheckContext())
        assert (await fresh.submit(sentence(2), [])).verdict.reason == "no_checker"
        fresh.close()
    finally:
        await pool.close()


async def test_a_dead_worker_is_replaced_and_the_replacement_serves_new_requests():
    pool, runner = await started_pool(1)
    try:
        pinned = runner.session(CheckContext())
        await pinned.submit(sentence(0), [])
        dead = pool.workers[0]
        assert dead.pid is not None
        os.kill(dead.pid, signal.SIGKILL)
        while dead.alive:
            await asyncio.sleep(0.01)
        report = await pinned.submit(sentence(1), [])  # its worker is gone: so is its answer
        assert (report.verdict.label, report.verdict.reason) == ("unverified", "error: WorkerGone")
        pinned.close()
        deadline = asyncio.get_running_loop().time() + 120
        while not (pool.workers[0] is not dead and pool.workers[0].alive):
            assert asyncio.get_running_loop().time() < deadline, "no replacement started"
            await asyncio.sleep(0.05)
        replacement = pool.workers[0]
        assert replacement.pid not in (None, dead.pid)
        fresh = runner.session(CheckContext())
        assert (await fresh.submit(sentence(2), [])).verdict.reason == "no_checker"  # NoChecker, in the new worker
        assert replacement.requests == 1
        fresh.close()
    finally:
        await pool.close()
    assert not pool.workers[0].alive


async def test_the_pipeline_in_a_worker_reports_what_it_reports_in_process(tmp_path):
    """The same answer through the offline pipeline in the relay's process and in a worker:
    the same verdicts and evidence (the request's context read once, in the worker)."""
    from middleware.composition import pipeline_checker

    overrides = {"check.sentence_budget_s": 60.0, "evidence.index_dir": str(tmp_path / "index")}
    settings = load_settings(**{**overrides, "check.workers": 1})
    local = CheckRunner(pipeline_checker(settings), settings.check)  # builds the demo index too
    pool = WorkerPool(settings, build_checker)
    await pool.start()
    try:
        remote = CheckRunner(pool, settings.check, in_workers=True)
        context = CheckContext(user_message="Tell me about Marie Curie.", mode=Mode.ANNOTATE)
        texts = ["Marie Curie was born in Warsaw in 1867.", "She won the Nobel Prize in Physics in 1911."]
        answers = []
        for runner in (local, remote):
            session = runner.session(context)
            reports = [await session.submit(sentence(i, t), texts[:i]) for i, t in enumerate(texts)]
            answers.append(([(r.verdict.label, r.verdict.evidence_id) for r in reports],
                            (await session.summary()).verdicts))
            session.close()
        assert answers[0] == answers[1]
        assert all(label != "unverified" for label, _ in answers[0][0])
    finally:
        await pool.close()


def test_a_builder_that_cannot_be_sent_by_name_is_refused_before_any_worker_starts() -> None:
    settings = load_settings(**{"check.checker": "none", "check.workers": 1})
    with pytest.raises(ValueError, match="module-level function"):
        WorkerPool(settings, lambda s: build_checker(s))
