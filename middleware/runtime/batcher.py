"""A micro-batcher: one queue in front of one model, shared by every stream of the process.

Callers ``await submit(item)`` (or ``submit_many``). A worker task collects items until there
are ``max_batch`` of them or the oldest has waited ``max_wait_ms``, sorts what it took by size
(token count) and cuts it into buckets so that short inputs are not padded to long ones, then
runs each bucket through ``run_batch`` in a worker thread, leaving the event loop free.

Guarantees: a caller cancelled before its batch runs is dropped from it; one cancelled while
its batch runs gets nothing and harms no one; an exception from ``run_batch`` reaches exactly
the callers whose items were in that bucket, and the worker goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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


class BatcherClosed(RuntimeError):
    """The batcher was closed while the item waited."""


class MicroBatcher(Generic[Item, Result]):
    """Batches items from concurrent callers into calls of ``run_batch(items) -> results``
    (same length and order). ``size_of`` measures an item for length bucketing; a new bucket
    starts when padding to the next item would waste more than the bucket's real size and more
    than ``pad_slack`` units."""

    def __init__(
        self,
        run_batch: Callable[[list[Item]], Sequence[Result]],
        max_batch: int = 32,
        max_wait_ms: float = 2.0,
        name: str = "model",
        size_of: Callable[[Item], int] | None = None,
        pad_slack: int = 64,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.run_batch = run_batch
        self.max_batch = max_batch
        self.max_wait = max(0.0, max_wait_ms) / 1000.0
        self.name = name
        self.size_of = size_of or (lambda _item: 1)
        self.pad_slack = pad_slack
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"batch-{name}")
        self._queue: deque[_Pending[Item, Result]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: asyncio.Task[None] | None = None
        self._arrived = asyncio.Event()
        self._full = asyncio.Event()
        self._closed = False

    async def submit(self, item: Item) -> Result:
        return (await self.submit_many([item]))[0]

    async def submit_many(self, items: Sequence[Item]) -> list[Result]:
        """Results for ``items`` in order; they may be spread over several batches."""
        if self._closed:
            raise BatcherClosed(f"batcher {self.name!r} is closed")
        if not items:
            return []
        loop = self._bind_loop()
        now = loop.time()
        futures = []
        for item in items:
            future: asyncio.Future[Result] = loop.create_future()
            self._queue.append(_Pending(item, self.size_of(item), future, now))
            futures.append(future)
        self._arrived.set()
        if len(self._queue) >= self.max_batch:
            self._full.set()
        return list(await asyncio.gather(*futures))

    async def aclose(self) -> None:
        """Stop the worker; waiting callers get ``BatcherClosed``."""
        self._closed = True
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
        self._fail_queued(BatcherClosed(f"batcher {self.name!r} closed"))
        self._executor.shutdown(wait=False)

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        """Start the worker on the running loop; a new loop (tests, a restarted app) gets a
        fresh queue, since futures of another loop cannot be awaited here."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._worker is None or self._worker.done():
            if self._loop is not loop:
                self._queue.clear()
                self._arrived, self._full = asyncio.Event(), asyncio.Event()
            self._loop = loop
            self._worker = loop.create_task(self._work(), name=f"batcher-{self.name}")
        return loop

    async def _work(self) -> None:
        while True:
            if not self._queue:
                self._arrived.clear()
                await self._arrived.wait()
                continue
            await self._fill()
            taken = self._take()
            try:
                for bucket in self._buckets(taken):
                    await self._run(bucket)
            except Exception as exc:  # a fault here must not strand the callers
                log.exception("batcher %s failed outside inference", self.name)
                self._settle(taken, exc)

    async def _fill(self) -> None:
        """Wait until a batch is full or the oldest item's wait is up."""
        assert self._loop is not None
        deadline = self._queue[0].enqueued + self.max_wait
        while len(self._queue) < self.max_batch:
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                return
            self._full.clear()
            try:
                async with asyncio.timeout(remaining):
                    await self._full.wait()
            except TimeoutError:
                return

    def _take(self) -> list[_Pending[Item, Result]]:
        taken: list[_Pending[Item, Result]] = []
        limit = self.max_batch * MAX_TAKE_BATCHES
        while self._queue and len(taken) < limit:
            pending = self._queue.popleft()
            if not pending.future.done():  # cancelled callers are dropped here
                taken.append(pending)
        if len(self._queue) < self.max_batch:
            self._full.clear()
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

    async def _run(self, bucket: list[_Pending[Item, Result]]) -> None:
        assert self._loop is not None
        live = [p for p in bucket if not p.future.done()]
        if not live:
            return
        now = self._loop.time()
        wait = QUEUE_WAIT.labels(model=self.name)
        for pending in live:
            wait.observe(now - pending.enqueued)
        BATCH_SIZE.labels(model=self.name).observe(len(live))
        items = [p.item for p in live]
        started = time.perf_counter()
        try:
            results = await self._loop.run_in_executor(self._executor, self._call, items)
        except asyncio.CancelledError:
            self._settle(live, BatcherClosed(f"batcher {self.name!r} stopped during inference"))
            raise
        except Exception as exc:  # noqa: BLE001 - any failure goes to this batch's callers
            log.warning("batch of %d on %s failed: %s", len(live), self.name, exc)
            self._settle(live, exc)
            return
        finally:
            INFERENCE_TIME.labels(model=self.name).observe(time.perf_counter() - started)
        for pending, result in zip(live, results, strict=True):
            if not pending.future.done():
                pending.future.set_result(result)

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

    def _fail_queued(self, exc: BaseException) -> None:
        while self._queue:
            pending = self._queue.popleft()
            if not pending.future.done() and not pending.future.get_loop().is_closed():
                pending.future.set_exception(exc)
