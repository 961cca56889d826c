"""A request's context cut into passages without stalling the relay's other requests.

Cutting a 390,000-character context takes 250-500 ms of pure Python. In a worker thread it
still held the GIL against the event loop: with three such requests arriving, ``/healthz``
took 135 ms at p99 and up to 570 ms (``load_tests/bench_large_context.py``, no checker).
:class:`ContextCutter` cuts a large context in a process of its own (one, spawned when the
first large context arrives, shared by every request of the relay): the loop only pickles
the texts out and the passages back (about 4 ms for 390,000 characters). A small context
(the common case: nothing, or a short system prompt) is cut on the loop, where a hop to
another process would cost more than the cut.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from middleware.evidence.request_passages import INLINE_CONTEXT_CHARS, ContextText, context_passages
from middleware.types import Passage

log = logging.getLogger(__name__)


class ContextCutter:
    """Cuts request contexts into passages: small ones inline, large ones in a process."""

    def __init__(self, inline_chars: int = INLINE_CONTEXT_CHARS) -> None:
        self.inline_chars = inline_chars
        self._pool: ProcessPoolExecutor | None = None

    async def passages(self, texts: Sequence[ContextText]) -> list[Passage]:
        if sum(len(t.text) for t in texts) <= self.inline_chars:
            return context_passages(texts)
        if self._pool is None:  # spawned, not forked: the relay's threads and loop do not survive a fork
            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, context_passages, list(texts))
        except BrokenProcessPool:  # the process died (killed, out of memory): a new one for the next request
            log.warning("the context-cutting process died; this context is cut in a thread, the next in a new process")
            self._pool = None
            return await asyncio.to_thread(context_passages, texts)

    def close(self) -> None:
        """Stop the cutting process, if one was started (requests in flight get an error)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
