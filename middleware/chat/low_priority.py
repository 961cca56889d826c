"""Work that an event loop does after its relaying: annotate mode's reading for checks.

asyncio runs ready callbacks in the order they became ready, so when a burst of streams
starts at once every stream's checking work (segmenting the text, submitting checks,
handing over their reports) sits in the same queue as every token and every new request.
On a busy relay a new stream's first token then waits behind all of it. Work queued here
runs instead in slices of at most ``SLICE_S`` per turn of the loop: each turn still relays
whatever its I/O brought, and the checking work takes what time is left, in the order it
was queued. An idle loop runs it at once, slice after slice; a busy one gives it at most a
share of its time (``SHARE``), so that a relay short of CPU (a burst of new streams on a
small machine) spends what it has on relaying.

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
SHARE = 0.25
"""A busy loop's slice: at most this share of the time it spent on everything else since
the last slice. Under saturation a turn is short, and a whole ``SLICE_S`` of every turn took
a third of the relay's time or more; this bounds it to a fifth."""
IDLE_S = 0.0002
"""Less than this spent elsewhere since the last slice: the loop had nothing else to do, and
the slice is ``SLICE_S``."""
AGING_AFTER_S = 0.5
"""Once the oldest queued call has waited this long, a turn's slice grows with its wait (up
to ``MAX_SLICE_S``), whatever the share: under a sustained overload the reading for checks,
and every annotate stream's summary and end behind it, still move on."""
MAX_SLICE_S = 0.005

_QUEUES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LowPriority] = weakref.WeakKeyDictionary()


class LowPriority:
    """Calls run in order, at most ``SLICE_S`` of them per turn of ``loop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._calls: deque[tuple[Callable[..., Any], tuple[Any, ...], float]] = deque()
        self._scheduled = False
        self._asked = 0.0
        """When the next slice was asked for: the loop's other work runs from then until it."""

    def __len__(self) -> int:
        return len(self._calls)

    def call(self, function: Callable[..., Any], *args: Any) -> None:
        """Run ``function(*args)`` after the calls queued before it, when the loop has time; an
        exception it raises is logged."""
        self._calls.append((function, args, time.perf_counter()))
        if not self._scheduled:
            self._scheduled = True
            self._ask()

    def run(self, function: Callable[..., R], *args: Any) -> asyncio.Future[R]:
        """``function(*args)`` queued like ``call``; its result (or exception) in the future."""
        result: asyncio.Future[R] = self._loop.create_future()
        self.call(_resolve, result, function, args)
        return result

    def drained(self) -> asyncio.Future[None]:
        """A future done once every call queued before now has run."""
        return self.run(_nothing)

    def _ask(self) -> None:
        self._asked = time.perf_counter()
        self._loop.call_soon(self._run)

    def _run(self) -> None:
        calls = self._calls
        now = time.perf_counter()
        deadline = now + max(turn_slice(now - self._asked), aged_slice(now - calls[0][2]) if calls else 0.0)
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
                self._ask()
            else:
                self._scheduled = False


def turn_slice(elsewhere_s: float) -> float:
    """A turn's slice when the loop spent ``elsewhere_s`` on other work since the last one."""
    return SLICE_S if elsewhere_s < IDLE_S else min(SLICE_S, SHARE * elsewhere_s)


def aged_slice(waited_s: float) -> float:
    """The slice a backlog whose oldest call has waited ``waited_s`` is owed (0: none yet)."""
    if waited_s <= AGING_AFTER_S:
        return 0.0
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
