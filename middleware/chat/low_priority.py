"""Work that an event loop does after its relaying: annotate mode's reading for checks.

asyncio runs ready callbacks in the order they became ready, so when a burst of streams
starts at once every stream's checking work (segmenting the text, submitting checks,
handing over their reports) sits in the same queue as every token and every new request.
On a busy relay a new stream's first token then waits behind all of it. Work queued here
runs instead in slices of at most ``SLICE_S`` per turn of the loop: each turn still relays
whatever its I/O brought, and the checking work takes what time is left, in the order it
was queued. An idle loop runs it at once, slice after slice.

One queue per event loop (``low_priority()``), shared by the streams on it."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")
log = logging.getLogger(__name__)

SLICE_S = 0.001
"""The longest a turn of the loop spends on queued work (a call that started is not cut)."""
AGING_AFTER_S = 0.5
"""Once the oldest queued call has waited this long, a turn's slice grows with its wait (up
to ``MAX_SLICE_S``): under a sustained overload the reading for checks, and every annotate
stream's summary and end behind it, still move on."""
MAX_SLICE_S = 0.005

_QUEUES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LowPriority] = weakref.WeakKeyDictionary()


class LowPriority:
    """Calls run in order, at most ``SLICE_S`` of them per turn of ``loop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._calls: deque[tuple[Callable[..., Any], tuple[Any, ...], float]] = deque()
        self._scheduled = False

    def __len__(self) -> int:
        return len(self._calls)

    def call(self, function: Callable[..., Any], *args: Any) -> None:
        """Run ``function(*args)`` after the calls queued before it, when the loop has time; an
        exception it raises is logged."""
        self._calls.append((function, args, time.perf_counter()))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._run)

    def run(self, function: Callable[..., R], *args: Any) -> asyncio.Future[R]:
        """``function(*args)`` queued like ``call``; its result (or exception) in the future."""
        result: asyncio.Future[R] = self._loop.create_future()
        self.call(_resolve, result, function, args)
        return result

    def drained(self) -> asyncio.Future[None]:
        """A future done once every call queued before now has run."""
        return self.run(_nothing)

    def _run(self) -> None:
        calls = self._calls
        now = time.perf_counter()
        deadline = now + slice_for(now - calls[0][2]) if calls else now
        try:
            while calls:
                function, args, _ = calls.popleft()
                try:
                    function(*args)
                except Exception:  # one stream's failure must not stop the others' work
                    log.exception("low-priority call %r failed", function)
                if time.perf_counter() >= deadline:
                    break
        finally:  # whatever a call raised, the rest still runs at a later turn
            if calls:
                self._loop.call_soon(self._run)
            else:
                self._scheduled = False


def slice_for(waited_s: float) -> float:
    """A turn's slice when the oldest queued call has waited ``waited_s``."""
    if waited_s <= AGING_AFTER_S:
        return SLICE_S
    return min(MAX_SLICE_S, SLICE_S * waited_s / AGING_AFTER_S)


def _resolve(result: asyncio.Future[R], function: Callable[..., R], args: tuple[Any, ...]) -> None:
    if result.done():  # its waiter was cancelled: nobody wants it
        return
    try:
        result.set_result(function(*args))
    except Exception as exc:  # the waiter gets it
        result.set_exception(exc)


def _nothing() -> None:
    return None


def low_priority() -> LowPriority:
    """The running event loop's queue of low-priority work."""
    loop = asyncio.get_running_loop()
    queue = _QUEUES.get(loop)
    if queue is None:
        queue = _QUEUES[loop] = LowPriority(loop)
    return queue
