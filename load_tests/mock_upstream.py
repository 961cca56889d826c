"""Run the scripted mock upstream on loopback: ``python -m load_tests.mock_upstream --port P``."""

from __future__ import annotations

from typing import Annotated

import typer
from aiohttp import web

from adapters.demo_upstream import DemoAnswers, DemoUpstream
from middleware.server import eventloop


def main(
    port: Annotated[int, typer.Option(help="port on 127.0.0.1")] = 8001,
    token_rate: Annotated[float, typer.Option(help="tokens per second per stream (0: unlimited)")] = 50.0,
) -> None:
    upstream = DemoUpstream(DemoAnswers.load(), default_rate=token_rate)
    factory = eventloop.loop_factory("auto")  # uvloop when installed: less CPU taken from the proxy under test
    loop = factory() if factory is not None else None
    web.run_app(upstream.app(), host="127.0.0.1", port=port, access_log=None, print=None, loop=loop)


if __name__ == "__main__":
    typer.run(main)
