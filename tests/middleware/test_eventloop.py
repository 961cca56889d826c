"""The server's event loop (``middleware.eventloop``): uvloop or asyncio by setting, and a clear
error when uvloop is asked for but not installed."""

from __future__ import annotations

import asyncio
import sys

import pytest

from middleware import eventloop


def test_event_loop_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvloop

    async def loop_type() -> type:
        return type(asyncio.get_running_loop())

    assert eventloop.loop_factory("asyncio") is None
    assert eventloop.run(loop_type(), "uvloop") is uvloop.Loop
    assert eventloop.run(loop_type(), "asyncio") is not uvloop.Loop
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed
    assert eventloop.loop_factory("auto") is None
    with pytest.raises(RuntimeError, match="uvloop is not installed"):
        eventloop.loop_factory("uvloop")
