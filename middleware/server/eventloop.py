"""The event loop the server runs on (``server.event_loop``).

uvloop (libuv under asyncio's interface) cuts the proxy's CPU per relayed event, and so the
time a new request waits for its turn on a busy loop; see the issue-8 note for figures.
asyncio's own loop remains available (``event_loop: asyncio``) and is what tests use. The
load tools (mock upstream, driver) run on the same loop, so that the instrument does not
saturate the machine it measures."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

EventLoopKind = Literal["auto", "uvloop", "asyncio"]
T = TypeVar("T")


def loop_factory(kind: EventLoopKind) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for ``kind``; None means asyncio's default loop."""
    if kind == "asyncio":
        return None
    try:
        import uvloop
    except ImportError as exc:
        if kind == "uvloop":
            raise RuntimeError("server.event_loop is 'uvloop' but uvloop is not installed (pip install uvloop)") from exc
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], kind: EventLoopKind = "auto") -> T:
    """``asyncio.run(main)`` on the loop ``kind`` names."""
    with asyncio.Runner(loop_factory=loop_factory(kind)) as runner:
        return runner.run(main)
