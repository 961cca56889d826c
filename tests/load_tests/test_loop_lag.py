"""The relay's loop-lag probe: a window's samples are the loop's lag, not the probe's own writing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from load_tests.loop_lag import LagProbe


async def test_a_new_window_does_not_count_the_previous_windows_write(tmp_path: Path, monkeypatch):
    probe = LagProbe(asyncio.get_running_loop(), str(tmp_path / "lag"))
    probe.start()
    await asyncio.sleep(0.05)
    real_replace = __import__("os").replace

    def slow_replace(src: str, dst: str) -> None:  # a write that takes 80 ms, as 20,000 samples can
        time.sleep(0.08)
        real_replace(src, dst)

    monkeypatch.setattr("load_tests.loop_lag.os.replace", slow_replace)
    probe.dump()
    first = [float(x) for x in (tmp_path / "lag").read_text().split()]
    await asyncio.sleep(0.05)
    monkeypatch.undo()
    probe.dump()
    second = [float(x) for x in (tmp_path / "lag").read_text().split()]
    assert first and second
    assert max(second) < 0.04  # the 80 ms write is not in the next window


async def test_a_blocked_loop_shows_as_lag(tmp_path: Path):
    probe = LagProbe(asyncio.get_running_loop(), str(tmp_path / "lag"))
    probe.start()
    await asyncio.sleep(0.01)
    time.sleep(0.06)  # the loop blocked
    await asyncio.sleep(0.01)
    probe.dump()
    assert max(float(x) for x in (tmp_path / "lag").read_text().split()) >= 0.05
