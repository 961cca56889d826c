"""The micro-batcher: batching, length buckets, worker thread, cancellation, error isolation."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from middleware.metrics import BATCH_SIZE
from middleware.runtime.batcher import BatcherClosed, MicroBatcher


class Recorder:
    """A run_batch double: doubles numbers, records each batch, optionally slow or failing."""

    def __init__(self, delay: float = 0.0, fail_on: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.threads: set[int] = set()
        self.delay = delay
        self.fail_on = fail_on

    def __call__(self, items: list[int]) -> list[int]:
        self.batches.append(list(items))
        self.threads.add(threading.get_ident())
        if self.delay:
            time.sleep(self.delay)
        if self.fail_on is not None and self.fail_on in items:
            raise ValueError(f"bad item {self.fail_on}")
        return [2 * x for x in items]


async def test_concurrent_callers_share_batches_and_get_their_own_results() -> None:
    run = Recorder()
    batcher = MicroBatcher(run, max_batch=8, max_wait_ms=50, name="t-share")
    results = await asyncio.gather(*(batcher.submit(i) for i in range(20)))
    assert results == [2 * i for i in range(20)]
    assert max(len(b) for b in run.batches) == 8 and len(run.batches) == 3
    assert sorted(x for b in run.batches for x in b) == list(range(20))
    assert await batcher.submit_many([5, 6, 7]) == [10, 12, 14]
    await batcher.aclose()


async def test_a_lone_item_waits_at_most_max_wait() -> None:
    batcher = MicroBatcher(Recorder(), max_batch=64, max_wait_ms=20, name="t-wait")
    t0 = time.perf_counter()
    assert await batcher.submit(1) == 2
    assert time.perf_counter() - t0 < 1.0  # dispatched on the timer, not on a full batch
    await batcher.aclose()


async def test_items_are_bucketed_by_length() -> None:
    run = Recorder()
    batcher = MicroBatcher(run, max_batch=16, max_wait_ms=50, name="t-bucket", size_of=lambda x: x)
    sizes = [3, 300, 4, 5, 6, 280, 7]
    await asyncio.gather(*(batcher.submit(s) for s in sizes))
    assert sorted(map(sorted, run.batches)) == [[3, 4, 5, 6, 7], [280, 300]]
    await batcher.aclose()


async def test_identical_items_of_a_batch_run_once_and_each_caller_gets_the_result() -> None:
    run = Recorder()
    batcher = MicroBatcher(run, max_batch=16, max_wait_ms=50, name="t-same")
    assert await asyncio.gather(*(batcher.submit(x) for x in [4, 9, 4, 4, 9, 1])) == [8, 18, 8, 8, 18, 2]
    assert [sorted(b) for b in run.batches] == [[1, 4, 9]]
    await batcher.aclose()


async def test_items_that_cannot_be_hashed_all_run() -> None:
    batcher = MicroBatcher(lambda items: [sum(x) for x in items], max_batch=8, max_wait_ms=50, name="t-lists")
    assert await asyncio.gather(*(batcher.submit([1, 2]) for _ in range(3))) == [3, 3, 3]
    await batcher.aclose()


async def test_inference_runs_off_the_event_loop() -> None:
    run = Recorder(delay=0.3)
    batcher = MicroBatcher(run, max_batch=4, max_wait_ms=1, name="t-thread")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    await batcher.submit(1)
    task.cancel()
    assert threading.get_ident() not in run.threads
    assert ticks >= 5  # the loop kept running while the batch slept in its thread
    await batcher.aclose()


async def test_a_caller_cancelled_while_queued_is_dropped() -> None:
    run = Recorder()
    batcher = MicroBatcher(run, max_batch=8, max_wait_ms=100, name="t-cancel-q")
    doomed = asyncio.create_task(batcher.submit(99))
    others = [asyncio.create_task(batcher.submit(i)) for i in range(3)]
    await asyncio.sleep(0.01)
    doomed.cancel()
    assert await asyncio.gather(*others) == [0, 2, 4]
    assert all(99 not in b for b in run.batches)
    with pytest.raises(asyncio.CancelledError):
        await doomed
    await batcher.aclose()


async def test_a_caller_cancelled_during_inference_harms_no_one() -> None:
    run = Recorder(delay=0.2)
    batcher = MicroBatcher(run, max_batch=8, max_wait_ms=5, name="t-cancel-run")
    tasks = [asyncio.create_task(batcher.submit(i)) for i in range(4)]
    await asyncio.sleep(0.1)  # the batch is running now
    tasks[0].cancel()
    assert await asyncio.gather(*tasks[1:]) == [2, 4, 6]
    assert await batcher.submit(10) == 20  # the worker survived
    await batcher.aclose()


async def test_an_exception_reaches_only_its_batch() -> None:
    run = Recorder(fail_on=500)
    batcher = MicroBatcher(run, max_batch=8, max_wait_ms=30, name="t-error", size_of=lambda x: x)
    # 500 lands in a bucket of its own (length bucketing), so only its caller fails
    results = await asyncio.gather(*(batcher.submit(x) for x in (1, 2, 500, 3)), return_exceptions=True)
    assert results[:2] == [2, 4] and results[3] == 6
    assert isinstance(results[2], ValueError)
    # a batch that fails as a whole fails all its callers, and the next batch is fine
    failing = await asyncio.gather(*(batcher.submit(x) for x in (500, 499)), return_exceptions=True)
    assert all(isinstance(r, ValueError) for r in failing)
    assert await batcher.submit(7) == 14
    await batcher.aclose()


async def test_wrong_result_count_is_an_error_for_that_batch() -> None:
    batcher = MicroBatcher(lambda items: items[:-1], max_batch=4, max_wait_ms=1, name="t-count")
    with pytest.raises(RuntimeError, match="returned 0 results for 1"):
        await batcher.submit(1)
    await batcher.aclose()


async def test_metrics_are_recorded_per_model() -> None:
    def count() -> float:
        return BATCH_SIZE.labels(model="t-metrics")._sum.get()  # type: ignore[attr-defined]

    before = count()
    batcher = MicroBatcher(Recorder(), max_batch=8, max_wait_ms=20, name="t-metrics")
    await asyncio.gather(*(batcher.submit(i) for i in range(5)))
    assert count() - before == 5  # the batch sizes add up to the items
    await batcher.aclose()


async def test_close_fails_waiting_callers() -> None:
    batcher = MicroBatcher(Recorder(), max_batch=8, max_wait_ms=10_000, name="t-close")
    waiting = asyncio.create_task(batcher.submit(1))
    await asyncio.sleep(0.01)
    await batcher.aclose()
    with pytest.raises(BatcherClosed):
        await waiting
    with pytest.raises(BatcherClosed):
        await batcher.submit(2)


def test_a_batcher_survives_a_new_event_loop() -> None:
    batcher = MicroBatcher(Recorder(), max_batch=4, max_wait_ms=1, name="t-loops")
    assert asyncio.run(batcher.submit(1)) == 2
    assert asyncio.run(batcher.submit(2)) == 4


def test_two_event_loops_in_two_threads_share_a_batcher() -> None:
    run = Recorder(delay=0.01)
    batcher = MicroBatcher(run, max_batch=4, max_wait_ms=5, name="t-threads")

    async def many(offset: int) -> list[int]:
        return list(await asyncio.gather(*(batcher.submit(offset + i) for i in range(12))))

    results: dict[str, list[int]] = {}
    other = threading.Thread(target=lambda: results.setdefault("thread", asyncio.run(many(100))))
    other.start()
    results["main"] = asyncio.run(many(0))
    other.join(timeout=30)
    assert results["main"] == [2 * i for i in range(12)]
    assert results["thread"] == [2 * (100 + i) for i in range(12)]
    assert all(max(b) < 100 or min(b) >= 100 for b in run.batches)  # one loop's futures per batch


async def test_batches_in_flight_overlap_in_their_own_threads() -> None:
    """With in_flight=2 the next batch runs while the last is still computing; every caller
    still gets its own result."""
    active, peak, lock = [0], [0], threading.Lock()

    def run(items: list[int]) -> list[int]:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return [2 * x for x in items]

    batcher = MicroBatcher(run, max_batch=4, max_wait_ms=1, name="t-in-flight", in_flight=2)
    results = await asyncio.gather(*(batcher.submit(i) for i in range(16)))
    assert results == [2 * i for i in range(16)]
    assert peak[0] == 2
    await batcher.aclose()


async def test_one_batch_in_flight_runs_batches_one_after_another() -> None:
    active, peak = [0], [0]

    def run(items: list[int]) -> list[int]:
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        time.sleep(0.02)
        active[0] -= 1
        return items

    batcher = MicroBatcher(run, max_batch=4, max_wait_ms=1, name="t-one-in-flight")
    await asyncio.gather(*(batcher.submit(i) for i in range(16)))
    assert peak[0] == 1
    await batcher.aclose()


async def test_closing_cancels_batches_in_flight() -> None:
    batcher = MicroBatcher(Recorder(delay=0.2), max_batch=2, max_wait_ms=1, name="t-close-in-flight", in_flight=2)
    calls = [asyncio.ensure_future(batcher.submit(i)) for i in range(4)]
    await asyncio.sleep(0.05)
    await batcher.aclose()
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(o, BatcherClosed) for o in outcomes)


async def test_an_item_submitted_during_its_own_inference_waits_for_it() -> None:
    run = Recorder(delay=0.2)
    batcher = MicroBatcher(run, max_batch=8, max_wait_ms=1, name="t-ride")
    first = asyncio.create_task(batcher.submit(3))
    await asyncio.sleep(0.1)  # 3 is in inference now
    assert await asyncio.gather(batcher.submit(3), batcher.submit(4), first) == [6, 8, 6]
    assert run.batches == [[3], [4]]  # 3 ran once; 4 queued as usual
    assert await batcher.submit(3) == 6 and run.batches[-1] == [3]  # done: a later 3 runs again
    await batcher.aclose()


async def test_a_rider_gets_the_result_when_the_first_caller_is_cancelled() -> None:
    run = Recorder(delay=0.2)
    batcher = MicroBatcher(run, max_batch=8, max_wait_ms=1, name="t-ride-cancel")
    first = asyncio.create_task(batcher.submit(5))
    await asyncio.sleep(0.1)
    rider = asyncio.create_task(batcher.submit(5))
    await asyncio.sleep(0.01)
    first.cancel()
    assert await rider == 10
    assert run.batches == [[5]]
    await batcher.aclose()


async def test_a_rider_gets_the_failure_of_the_inference_it_joined() -> None:
    run = Recorder(delay=0.2, fail_on=7)
    batcher = MicroBatcher(run, max_batch=8, max_wait_ms=1, name="t-ride-fail")
    first = asyncio.create_task(batcher.submit(7))
    await asyncio.sleep(0.1)
    results = await asyncio.gather(batcher.submit(7), first, return_exceptions=True)
    assert all(isinstance(r, ValueError) for r in results) and run.batches == [[7]]
    await batcher.aclose()


async def test_closing_fails_riders_of_an_inference_in_flight() -> None:
    batcher = MicroBatcher(Recorder(delay=0.3), max_batch=8, max_wait_ms=1, name="t-ride-close", in_flight=2)
    first = asyncio.create_task(batcher.submit(1))
    await asyncio.sleep(0.1)
    rider = asyncio.create_task(batcher.submit(1))
    await asyncio.sleep(0.01)
    await batcher.aclose()
    for task in (first, rider):
        with pytest.raises(BatcherClosed):
            await task
