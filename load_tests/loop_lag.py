"""Run ``factcheck serve`` with its event loop's lag sampled: ``python load_tests/loop_lag.py
serve ARGS...`` (run as a file, so that ``middleware`` comes from ``PYTHONPATH``: the same
probe measures any checkout's relay, a baseline's included).

A timer of ``LAG_INTERVAL_S`` is re-armed on the relay's loop over and over; how late each
one fires (its overshoot) is the loop's lag: the time a ready callback, such as relaying a
token, waits because the loop is busy elsewhere. On SIGUSR1 the samples since the last
signal are written, one per line in seconds, to the file ``FACTCHECK_LOOP_LAG_FILE`` names,
and the next window starts (``load_tests.driver`` signals before and after each run)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable

LAG_INTERVAL_S = 0.001


class LagProbe:
    def __init__(self, loop: asyncio.AbstractEventLoop, path: str) -> None:
        self.loop = loop
        self.path = path
        self.samples: list[float] = []
        self._due = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self.loop.add_signal_handler(signal.SIGUSR1, self.dump)
        self._arm()

    def _arm(self) -> None:
        self._due = time.perf_counter() + LAG_INTERVAL_S
        self._timer = self.loop.call_later(LAG_INTERVAL_S, self._fired)

    def _fired(self) -> None:
        self.samples.append(max(0.0, time.perf_counter() - self._due))
        self._arm()

    def dump(self) -> None:
        """Write the samples and start a new window. The timer is re-armed after the write:
        the write itself (20,000 samples after a 20 s run: ~30 ms) is the probe's own stall,
        which the next window would otherwise report as the relay's lag."""
        if self._timer is not None:
            self._timer.cancel()
        samples, self.samples = self.samples, []
        with open(self.path + ".tmp", "w") as out:
            out.write("\n".join(f"{s:.6f}" for s in samples))
        os.replace(self.path + ".tmp", self.path)
        self._arm()


def probed(factory: Callable[[], asyncio.AbstractEventLoop] | None, path: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """``factory`` (None: asyncio's loop) with a probe started on each loop it makes."""

    def make() -> asyncio.AbstractEventLoop:
        loop = factory() if factory is not None else asyncio.new_event_loop()
        loop.call_soon(LagProbe(loop, path).start)
        return loop

    return make


def main() -> None:
    from middleware import cli
    from middleware import eventloop

    path = os.environ["FACTCHECK_LOOP_LAG_FILE"]
    choose = eventloop.loop_factory
    eventloop.loop_factory = lambda kind: probed(choose(kind), path)  # type: ignore[assignment]
    sys.argv = ["factcheck", *sys.argv[1:]]
    cli.app()


if __name__ == "__main__":
    main()
