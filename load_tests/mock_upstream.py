"""Run the scripted mock upstream on loopback: ``python -m load_tests.mock_upstream --port P``.

It listens through the proxy's own site (``start_site``: accepts every waiting connection
per turn of the loop). uvloop's own server accepts one connection per turn, which made the
proxy's accept queue grow under a burst of new streams; no figure of the driver moved when
the mock upstream changed over, but the instrument now cannot be what holds a burst back."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from middleware import eventloop
from middleware.commands.serve import start_demo_upstream


async def serve(port: int, token_rate: float) -> None:
    runner, _ = await start_demo_upstream(port=port, token_rate=token_rate)
    try:
        await asyncio.Event().wait()  # until the driver stops the process
    finally:
        await runner.cleanup()


def main(
    port: Annotated[int, typer.Option(help="port on 127.0.0.1")] = 8001,
    token_rate: Annotated[float, typer.Option(help="tokens per second per stream (0: unlimited)")] = 50.0,
) -> None:
    eventloop.run(serve(port, token_rate))  # uvloop when installed: less CPU taken from the proxy under test


if __name__ == "__main__":
    typer.run(main)
