"""A micro-batcher: one queue in front of one model, shared by every stream of the process.

Callers ``await submit(item)`` (or ``submit_many``). A worker task collects items until there
are ``max_batch`` of them or the oldest has waited ``max_wait_ms``, sorts what it took by size
(token count) and cuts it into buckets so that short inputs are not padded to long ones, then
runs each bucket through ``run_batch`` in a worker thread, leaving the event loop free. With
``in_flight`` above 1 (a GPU), that many batches run at once in as many threads, so the next
batch is prepared while the device computes the last one.

Identical items of one batch (hashable ones: texts, pairs) run once and share the result; an
item submitted while an identical one is in inference waits for that inference instead of
queueing again (concurrent streams checking the same text pay for it once).

Guarantees: a caller cancelled before its batch runs is dropped from it; one cancelled while
its batch runs gets nothing and harms no one; an exception from ``run_batch`` reaches exactly
the callers whose items were in that bucket, and the worker goes on.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from middleware.metrics import BATCH_SIZE, INFERENCE_TIME, QUEUE_WAIT

log = logging.getLogger(__name__)

Item = TypeVar("Item")
Result = TypeVar("Result")

MAX_TAKE_BATCHES = 4
"""At most this many batches' worth of queued items are taken and bucketed together."""


@dataclass(slots=True)
class _Pending(Generic[Item, Result]):
    item: Item
    size: int
    future: asyncio.Future[Result]
    enqueued: float


@dataclass
class _Lane(Generic[Item, Result]):
    """The queue and worker task of one event loop (futures belong to their loop)."""

    loop: asyncio.AbstractEventLoop
    queue: deque[_Pending[Item, Result]] = field(default_factory=deque)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    full: asyncio.Event = field(default_factory=asyncio.Event)
    worker: asyncio.Task[None] | None = None
    running: set[asyncio.Task[None]] = field(default_factory=set)
    riders: dict[Item, list[_Pending[Item, Result]]] = field(default_factory=dict)
    """Items in inference now, each with the callers that submitted it again meanwhile."""


class BatcherClosed(RuntimeError):
    """The batcher was closed while the item waited."""


class MicroBatcher(Generic[Item, Result]):
    """Batches items from concurrent callers into calls of ``run_batch(items) -> results``
    (same length and order). ``size_of`` measures an item for length bucketing; a new bucket
    starts when padding to the next item would waste more than the bucket's real size and more
    than ``pad_slack`` units.

    Each event loop that submits gets its own queue and worker task (a server loop and an
    ``asyncio.run`` in another thread can share one model); all lanes run their batches on the
    batcher's single inference thread, one at a time."""

    def __init__(
        self,
        run_batch: Callable[[list[Item]], Sequence[Result]],
        max_batch: int = 32,
        max_wait_ms: float = 2.0,
        name: str = "model",
        size_of: Callable[[Item], int] | None = None,
        pad_slack: int = 64,
        in_flight: int = 1,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.run_batch = run_batch
        self.max_batch = max_batch
        self.max_wait = max(0.0, max_wait_ms) / 1000.0
        self.name = name
        self.size_of = size_of or (lambda _item: 1)
        self.pad_slack = pad_slack
        if in_flight < 1:
            raise ValueError("in_flight must be at least 1")
        self.in_flight = in_flight
        self._executor = ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix=f"batch-{name}")
        self._lanes: dict[asyncio.AbstractEventLoop, _Lane[Item, Result]] = {}
        self._lanes_lock = threading.Lock()
        self._closed = False

    async def submit(self, item: Item) -> Result:
        return (await self.submit_many([item]))[0]

    async def submit_many(self, items: Sequence[Item]) -> list[Result]:
        """Results for ``items`` in order; they may be spread over several batches."""
        if self._closed:
            raise BatcherClosed(f"batcher {self.name!r} is closed")
        if not items:
            return []
        lane = self._lane()
        now = lane.loop.time()
        futures = []
        for item in items:
            future: asyncio.Future[Result] = lane.loop.create_future()
            pending = _Pending(item, self.size_of(item), future, now)
            riders = lane.riders.get(item) if _hashable(item) else None
            if riders is not None:
                riders.append(pending)
            else:
                lane.queue.append(pending)
            futures.append(future)
        lane.arrived.set()
        if len(lane.queue) >= self.max_batch:
            lane.full.set()
        return list(await asyncio.gather(*futures))

    async def aclose(self) -> None:
        """Stop the workers; waiting callers get ``BatcherClosed``. Call it from the loop that
        used the batcher (other loops' workers are cancelled thread-safely)."""
        self._closed = True
        current = asyncio.get_running_loop()
        with self._lanes_lock:
            lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            if lane.loop is current:
                await self._stop(lane)
            elif not lane.loop.is_closed():
                lane.loop.call_soon_threadsafe(self._fail_lane, lane)
        self._executor.shutdown(wait=False)

    async def _stop(self, lane: _Lane[Item, Result]) -> None:
        for task in list(lane.running):
            task.cancel()
        await asyncio.gather(*lane.running, return_exceptions=True)
        if lane.worker is not None and not lane.worker.done():
            lane.worker.cancel()
            try:
                await lane.worker
            except asyncio.CancelledError:
                pass
        self._fail_lane(lane)

    def _fail_lane(self, lane: _Lane[Item, Result]) -> None:
        if lane.worker is not None:
            lane.worker.cancel()
        closed = BatcherClosed(f"batcher {self.name!r} closed")
        while lane.queue:
            pending = lane.queue.popleft()
            if not pending.future.done():
                pending.future.set_exception(closed)

    def _lane(self) -> _Lane[Item, Result]:
        """The running loop's lane, with a live worker; lanes of closed loops are dropped."""
        loop = asyncio.get_running_loop()
        with self._lanes_lock:
            for old in [lp for lp in self._lanes if lp.is_closed()]:
                del self._lanes[old]
            lane = self._lanes.get(loop)
            if lane is None:
                lane = self._lanes[loop] = _Lane(loop)
        if lane.worker is None or lane.worker.done():
            lane.worker = loop.create_task(self._work(lane), name=f"batcher-{self.name}")
        return lane

    async def _work(self, lane: _Lane[Item, Result]) -> None:
        while True:
            if not lane.queue:
                lane.arrived.clear()
                await lane.arrived.wait()
                continue
            await self._fill(lane)
            taken = self._take(lane)
            try:
                for bucket in self._buckets(taken):
                    if self.in_flight == 1:
                        await self._run(lane, bucket)
                    else:
                        await self._start(lane, bucket)
            except Exception as exc:  # a fault here must not strand the callers
                log.exception("batcher %s failed outside inference", self.name)
                self._settle(taken, exc)

    async def _start(self, lane: _Lane[Item, Result], bucket: list[_Pending[Item, Result]]) -> None:
        """Run ``bucket`` without waiting for it, once fewer than ``in_flight`` batches run: the
        next batch is formed and tokenised while the device computes the last one."""
        while len(lane.running) >= self.in_flight:
            await asyncio.wait(lane.running, return_when=asyncio.FIRST_COMPLETED)
        task = lane.loop.create_task(self._run(lane, bucket))
        lane.running.add(task)
        task.add_done_callback(lane.running.discard)

    async def _fill(self, lane: _Lane[Item, Result]) -> None:
        """Wait until a batch is full or the oldest item's wait is up."""
        deadline = lane.queue[0].enqueued + self.max_wait
        while len(lane.queue) < self.max_batch:
            remaining = deadline - lane.loop.time()
            if remaining <= 0:
                return
            lane.full.clear()
            try:
                async with asyncio.timeout(remaining):
                    await lane.full.wait()
            except TimeoutError:
                return

    def _take(self, lane: _Lane[Item, Result]) -> list[_Pending[Item, Result]]:
        taken: list[_Pending[Item, Result]] = []
        limit = self.max_batch * MAX_TAKE_BATCHES
        while lane.queue and len(taken) < limit:
            pending = lane.queue.popleft()
            if not pending.future.done():  # cancelled callers are dropped here
                taken.append(pending)
        if len(lane.queue) < self.max_batch:
            lane.full.clear()
        return taken

    def _buckets(self, taken: list[_Pending[Item, Result]]) -> list[list[_Pending[Item, Result]]]:
        buckets: list[list[_Pending[Item, Result]]] = []
        current: list[_Pending[Item, Result]] = []
        real = 0
        for pending in sorted(taken, key=lambda p: p.size):
            if current and (len(current) >= self.max_batch or self._wasteful(len(current), real, pending.size)):
                buckets.append(current)
                current, real = [], 0
            current.append(pending)
            real += pending.size
        if current:
            buckets.append(current)
        return buckets

    def _wasteful(self, count: int, real: int, size: int) -> bool:
        """Would padding ``count`` items (``real`` units in all) to ``size`` waste too much?"""
        waste = (count + 1) * size - (real + size)
        return waste > max(real + size, self.pad_slack)

    async def _run(self, lane: _Lane[Item, Result], bucket: list[_Pending[Item, Result]]) -> None:
        live = [p for p in bucket if not p.future.done()]
        if not live:
            return
        items, positions = distinct([p.item for p in live])
        shared = [item for item in items if _hashable(item) and item not in lane.riders]
        for item in shared:
            lane.riders[item] = []
        closed = BatcherClosed(f"batcher {self.name!r} stopped during inference")
        outcome: Sequence[Result] | BaseException = closed
        try:
            outcome = await self._infer(lane.loop, live, items)
        except asyncio.CancelledError:
            self._settle(live, closed)
            raise
        finally:
            self._release(lane, shared, items, outcome)
        if isinstance(outcome, BaseException):
            self._settle(live, outcome)
            return
        for pending, position in zip(live, positions, strict=True):
            if not pending.future.done():
                pending.future.set_result(outcome[position])

    async def _infer(
        self, loop: asyncio.AbstractEventLoop, live: list[_Pending[Item, Result]], items: list[Item]
    ) -> Sequence[Result] | BaseException:
        """The results of ``items`` in order, or the failure that is every caller's answer."""
        now = loop.time()
        wait = QUEUE_WAIT.labels(model=self.name)
        for pending in live:
            wait.observe(now - pending.enqueued)
        BATCH_SIZE.labels(model=self.name).observe(len(live))
        started = time.perf_counter()
        try:
            return await loop.run_in_executor(self._executor, self._call, items)
        except Exception as exc:  # noqa: BLE001 - any failure goes to this batch's callers
            log.warning("batch of %d on %s failed: %s", len(live), self.name, exc)
            return exc
        finally:
            INFERENCE_TIME.labels(model=self.name).observe(time.perf_counter() - started)

    @staticmethod
    def _release(lane: _Lane[Item, Result], shared: list[Item], items: list[Item],
                 outcome: Sequence[Result] | BaseException) -> None:
        """Give the callers that joined ``shared`` items during inference the same outcome."""
        for item in shared:
            for rider in lane.riders.pop(item):
                if rider.future.done():
                    continue
                if isinstance(outcome, BaseException):
                    rider.future.set_exception(outcome)
                else:
                    rider.future.set_result(outcome[items.index(item)])

    def _call(self, items: list[Item]) -> Sequence[Result]:
        results = self.run_batch(items)
        if len(results) != len(items):
            raise RuntimeError(f"{self.name}: run_batch returned {len(results)} results for {len(items)} items")
        return results

    @staticmethod
    def _settle(live: list[_Pending[Item, Result]], exc: BaseException) -> None:
        for pending in live:
            if not pending.future.done():
                pending.future.set_exception(exc)


def distinct(items: list[Item]) -> tuple[list[Item], list[int]]:
    """The distinct items of a batch, in first-seen order, and where each item's result is
    among theirs: concurrent streams checking the same text (the same question, the same
    evidence window and claim) share one inference. Items that cannot be hashed all run."""
    index: dict[Item, int] = {}
    try:
        positions = [index.setdefault(item, len(index)) for item in items]
    except TypeError:
        return items, list(range(len(items)))
    return list(index), positions


def _hashable(item: object) -> bool:
    try:
        hash(item)
    except TypeError:
        return False
    return True
