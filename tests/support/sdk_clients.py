"""The official SDKs' async clients a test makes are closed when the test ends.

An ``openai``/``anthropic`` client left to the garbage collector closes its HTTP client in a
task on whatever event loop runs then, a later test's loop, often closed by then: that task's
"Event loop is closed" error is logged inside the later test, which fails on its clean log.
Modules that make SDK clients import ``closed_sdk_clients`` (an autouse fixture)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest


@pytest.fixture(autouse=True)
async def closed_sdk_clients(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    made: list[Any] = []
    for cls in (openai.AsyncOpenAI, anthropic.AsyncAnthropic):
        def recording(self: Any, *args: Any, _init: Any = cls.__init__, **kwargs: Any) -> None:
            _init(self, *args, **kwargs)
            made.append(self)

        monkeypatch.setattr(cls, "__init__", recording)
    yield
    for client in made:
        await client.close()
