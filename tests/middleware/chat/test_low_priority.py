"""The low-priority queue: order, slices per turn of the loop, failures, one queue per loop."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from middleware.chat import low_priority as module
from middleware.chat.low_priority import LowPriority, low_priority


async def test_calls_run_in_order_after_the_current_callback() -> None:
    queue = low_priority()
    ran: list[int] = []
    for i in range(5):
        queue.call(ran.append, i)
    assert ran == []  # nothing runs inside the caller's own turn
    await queue.drained()
    assert ran == [0, 1, 2, 3, 4]
    assert len(queue) == 0


async def test_a_turn_of_the_loop_runs_at_most_one_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slow calls are spread over turns: between two slices the loop runs what became ready
    meanwhile (here a callback queued by the first call), so relaying never waits for the
    whole queue."""
    monkeypatch.setattr(module, "SLICE_S", 0.002)
    loop = asyncio.get_running_loop()
    queue = LowPriority(loop)
    order: list[str] = []

    def slow(name: str) -> None:
        time.sleep(0.003)  # longer than a slice: one call per turn
        order.append(name)
        if name == "a":
            loop.call_soon(order.append, "relayed")

    for name in "abc":
        queue.call(slow, name)
    await queue.drained()
    assert order == ["a", "relayed", "b", "c"]


async def test_cheap_calls_share_one_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "IDLE_S", 1.0)  # a loop with nothing else to do: the whole slice
    loop = asyncio.get_running_loop()
    queue = LowPriority(loop)
    order: list[str] = []
    for i in range(100):
        queue.call(order.append, str(i))
    loop.call_soon(order.append, "other")  # queued after the queue's first turn
    await queue.drained()
    assert order.index("other") == 100  # the hundred cheap calls took one slice


async def test_a_failing_call_is_logged_and_the_rest_run(caplog: pytest.LogCaptureFixture) -> None:
    queue = low_priority()
    ran: list[int] = []

    def fail() -> None:
        raise ValueError("boom")

    queue.call(fail)
    queue.call(ran.append, 1)
    with caplog.at_level(logging.ERROR, logger=module.__name__):
        await queue.drained()
    assert ran == [1]
    assert "boom" in caplog.text


def test_one_queue_per_event_loop() -> None:
    async def queue_of_this_loop() -> LowPriority:
        first = low_priority()
        assert low_priority() is first
        return first

    assert asyncio.run(queue_of_this_loop()) is not asyncio.run(queue_of_this_loop())


async def test_run_gives_the_result_or_the_exception_of_its_call() -> None:
    queue = low_priority()
    assert await queue.run(sum, [1, 2, 3]) == 6
    with pytest.raises(ZeroDivisionError):
        await queue.run(divmod, 1, 0)
    ran: list[int] = []
    waiter = queue.run(ran.append, 1)
    waiter.cancel()  # nobody waits for it: it is not run
    await queue.drained()
    assert ran == [] and waiter.cancelled()


def test_a_busy_loop_gives_a_share_of_its_time_and_an_idle_one_the_whole_slice() -> None:
    assert module.turn_slice(0.0) == module.turn_slice(module.IDLE_S / 2) == module.SLICE_S
    assert module.turn_slice(0.002) == pytest.approx(module.SHARE * 0.002)
    assert module.turn_slice(0.002) < module.SLICE_S
    assert module.turn_slice(1.0) == module.SLICE_S


def test_the_slice_grows_only_once_the_oldest_call_waited_long() -> None:
    assert module.aged_slice(0.0) == module.aged_slice(module.AGING_AFTER_S) == 0.0
    assert module.SLICE_S < module.aged_slice(2 * module.AGING_AFTER_S) <= module.MAX_SLICE_S
    assert module.aged_slice(3600.0) == module.MAX_SLICE_S


async def test_a_busy_loop_runs_fewer_calls_per_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """2 ms of other work since the slice was asked for: a 0.5 ms slice, which holds two
    calls of 0.3 ms (the second starts before the deadline), not three."""
    loop = asyncio.get_running_loop()
    queue = LowPriority(loop)
    order: list[str] = []
    monkeypatch.setattr(module.time, "perf_counter", lambda: 100.0)  # asked for at t=100
    for name in "abcd":
        queue.call(order.append, name)
    clock = iter([100.002 + 0.0003 * i for i in range(10)])  # 2 ms later, each call 0.3 ms
    monkeypatch.setattr(module.time, "perf_counter", lambda: next(clock))
    loop.call_soon(order.append, "other")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert order[:3] == ["a", "b", "other"]


async def test_a_backlog_that_waited_long_gets_longer_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    queue = LowPriority(loop)
    order: list[str] = []
    monkeypatch.setattr(module.time, "perf_counter", lambda: 100.0)  # queued at t=100
    for name in "abc":
        queue.call(order.append, name)
    clock = iter([101.0 + 0.0015 * i for i in range(10)])  # a second later, each call 1.5 ms
    monkeypatch.setattr(module.time, "perf_counter", lambda: next(clock))
    loop.call_soon(order.append, "other")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert order[:3] == ["a", "b", "other"]  # waited 1 s: a 2 ms slice held two 1.5 ms calls, not one
