"""Replay the hostile probe of issue 23 against a local proxy and print pass/fail per probe.

    python -m load_tests.probe                    # the real pipeline (context evidence only)
    python -m load_tests.probe --checker none     # transport only: quicker, no models loaded
    python -m load_tests.probe --only faults      # one group: malformed, faults, limits, rate, ws, stall,
                                                  # amplification

The proxy and a scripted upstream (``adapters.demo_upstream``, driven by each request's
``mock`` object) run in this process on loopback; nothing else is reached. Exit status 1 when
a probe fails."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

import aiohttp
import typer

from adapters.demo_upstream import DemoUpstream, tokenize
from middleware.composition import build_app
from middleware.commands.serve import start_site
from middleware.settings import Settings, load_settings
from middleware.sse import SSEEvent, SSEParser, delta_content

TEXT = "The Eiffel Tower is in Paris. It was completed in 1889. Marie Curie was born in Warsaw in 1867."
MODES = ("off", "annotate", "correct")
GROUPS = ("malformed", "faults", "limits", "rate", "ws", "stall", "amplification")


@dataclass
class Result:
    group: str
    name: str
    passed: bool
    detail: str


@dataclass
class Target:
    url: str
    """The proxy's base URL, ending in /v1."""
    settings: Settings


# --------------------------------------------------------------------------- HTTP helpers
def body(mode: str = "annotate", stream: bool = True, text: str = TEXT, **mock: Any) -> dict[str, Any]:
    return {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "Tell me about Paris."}],
            "mock": {"text": text, **mock}, "factcheck": {"mode": mode}}


async def post(url: str, data: bytes, **headers: str) -> tuple[int, bytes, bool]:
    """Status, body and whether the body ended properly (a truncated chunked body is False)."""
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/chat/completions", data=data,
                                headers={"Content-Type": "application/json", **headers}) as response:
            try:
                return response.status, await response.read(), True
            except aiohttp.ClientPayloadError:
                return response.status, b"", False


def events_of(raw: bytes) -> list[SSEEvent]:
    parser = SSEParser(max_event_bytes=64 * 1024 * 1024)
    return parser.feed(raw) + parser.flush()


def error_code(raw: bytes) -> str | None:
    try:
        error = json.loads(raw)["error"]
        return error["code"] if {"message", "type", "param", "code"} <= set(error) else None
    except (ValueError, KeyError, TypeError):
        return None


def stream_end(events: list[SSEEvent]) -> str:
    """'done', 'error:<code>' or 'none' (the stream ended without either)."""
    if not events:
        return "none"
    if events[-1].is_done:
        return "done"
    code = error_code(events[-1].data.encode() if events[-1].data else b"")
    return f"error:{code}" if code else "none"


# --------------------------------------------------------------------------- probes
async def malformed(target: Target) -> list[Result]:
    """Malformed requests get a 400 in the OpenAI error format, in every mode."""
    nested = "[" * 5000 + "]" * 5000
    cases: dict[str, Callable[[str], bytes]] = {
        "invalid JSON": lambda m: b'{"messages": [',
        "not an object": lambda m: b"[1, 2]",
        "no messages": lambda m: json.dumps({"model": "m", "factcheck": m}).encode(),
        "nested 5000 deep": lambda m: f'{{"messages": [{{"role": "user", "content": "q"}}], "x": {nested}}}'.encode(),
        "lone surrogate in context": lambda m: json.dumps(
            {**body(m), "factcheck": {"mode": m, "context": ["Paris \ud800 is big."]}}).encode(),
        "content part text 5": lambda m: json.dumps(
            {**body(m), "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}).encode(),
        "content part text null": lambda m: json.dumps(
            {**body(m), "messages": [{"role": "user", "content": [{"type": "text", "text": None}]}]}).encode(),
        "content part not an object": lambda m: json.dumps(
            {**body(m), "messages": [{"role": "user", "content": ["hello"]}]}).encode(),
        "unknown mode": lambda m: json.dumps({**body(m), "factcheck": {"mode": "loud"}}).encode(),
    }
    results = []
    for name, make in cases.items():
        outcomes = [await post(target.url, make(mode)) for mode in MODES]
        passed = all(status == 400 and error_code(raw) for status, raw, _ in outcomes)
        detail = ", ".join(f"{mode} {status} {error_code(raw)}" for mode, (status, raw, _) in zip(MODES, outcomes,
                                                                                                  strict=True))
        results.append(Result("malformed", name, passed, detail))
    return results


async def faults(target: Target) -> list[Result]:
    """Upstream faults: every stream ends with [DONE] or an error event and loses nothing."""
    results = []
    sent = "".join(tokenize(TEXT)[:6])
    for mode in MODES:
        status, raw, complete = await post(target.url, json.dumps(body(mode, fail_after=6)).encode())
        events = events_of(raw)
        ok = status == 200 and complete and stream_end(events).startswith("error") and delta_content(events) == sent
        results.append(Result("faults", f"upstream drops mid-stream ({mode})", ok,
                              f"{len(raw)} B, end {stream_end(events)}, {len(delta_content(events))}/{len(sent)} chars"))
    limit = target.settings.upstream.max_event_bytes
    for mode in MODES:
        data = json.dumps(body(mode, big_event_after=3, big_event_bytes=limit + 1024)).encode()
        status, raw, complete = await asyncio.wait_for(post(target.url, data), 60)
        end = stream_end(events_of(raw))
        results.append(Result("faults", f"event over {limit} B ({mode})", complete and end == "error:event_too_large",
                              f"status {status}, end {end}"))
    for mode in MODES:
        status, raw, complete = await post(target.url, json.dumps(body(mode, surrogate_after=4)).encode())
        events = events_of(raw)
        results.append(Result("faults", f"lone surrogate from upstream ({mode})", complete and stream_end(events) == "done",
                              f"status {status}, end {stream_end(events)}"))
    results.append(await _redirect(target))
    text = "Traceback (most recent call last): /srv/app/settings.py DB_PASSWORD=hunter2"
    status, raw, _ = await post(target.url, json.dumps(body(stream=False, error_status=500, error_text=text)).encode())
    results.append(Result("faults", "non-JSON upstream error body", status == 500 and b"hunter2" not in raw,
                          f"status {status}: {raw[:120].decode(errors='replace')}"))
    return results


async def _redirect(target: Target) -> Result:
    status, raw, _ = await post(target.url, json.dumps(
        body(stream=False, redirect_to=target.url.removesuffix("/v1") + "/metrics")).encode())
    return Result("faults", "upstream redirect to loopback", status == 502 and error_code(raw) == "redirect",
                  f"status {status}, code {error_code(raw)}, {len(raw)} B")


async def limits(target: Target) -> list[Result]:
    """The stream cap holds while the upstream withholds its headers; the rate limit without keys."""
    cap = target.settings.server.max_concurrent_streams
    data = json.dumps(body("off", headers_delay=3600)).encode()
    statuses = [status for status, _, _ in await asyncio.gather(*(post(target.url, data) for _ in range(cap + 8)))]
    held = [s for s in statuses if s != 429]
    results = [Result("limits", f"stream cap {cap} with a silent upstream", len(held) == cap,
                      f"{statuses.count(429)} x 429, others {sorted(held)}")]
    return results


async def rate(target: Target) -> list[Result]:
    """The rate limit holds without API keys (by client address)."""
    per_minute = target.settings.server.rate_limit_per_minute
    quick = json.dumps(body("off", stream=False, text="Hi.")).encode()
    statuses = [(await post(target.url, quick))[0] for _ in range(per_minute + 2)]
    return [Result("limits", f"rate limit {per_minute}/min without keys", statuses.count(429) == 2,
                   " ".join(map(str, statuses)))]


async def websocket(target: Target) -> list[Result]:
    """Deep nesting answered with an error message; a foreign Origin refused."""
    results = []
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"{target.url}/ws") as ws:
            await ws.send_str("[" * 10_000 + "]" * 10_000)
            reply = await asyncio.wait_for(ws.receive(), 10)
            ok = reply.type is aiohttp.WSMsgType.TEXT and "error" in json.loads(reply.data)
            await ws.send_json({"type": "cancel"})
            results.append(Result("ws", "10,000-deep message", ok and not ws.closed, str(reply.data)[:120]))
        try:
            async with session.ws_connect(f"{target.url}/ws", headers={"Origin": "https://evil.example"}):
                status = 101
        except aiohttp.WSServerHandshakeError as exc:
            status = exc.status
        results.append(Result("ws", "foreign Origin", status == 403, f"handshake status {status}"))
    return results


async def stall(target: Target) -> list[Result]:
    """A 390 KB context without spaces (tokeniser worst case) must not stall other requests."""
    request = body("annotate")
    request["factcheck"]["context"] = ["x" * 390_000]
    heavy = asyncio.create_task(post(target.url, json.dumps(request).encode()))
    health = target.url.removesuffix("/v1") + "/healthz"
    latencies = []
    async with aiohttp.ClientSession() as session:
        while not heavy.done() or len(latencies) < 5:
            t0 = time.perf_counter()
            async with session.get(health) as response:
                await response.read()
            latencies.append(time.perf_counter() - t0)
            await asyncio.sleep(0.01)
    status, raw, _ = heavy.result()
    worst = max(latencies) * 1000
    return [Result("stall", "healthz beside a 390 KB context", status == 200 and worst < 500,
                   f"worst {worst:.0f} ms over {len(latencies)} requests; heavy request {status}")]


async def amplification(target: Target) -> list[Result]:
    """A 100 KB context checked by a 20-sentence answer: response size against request size."""
    context = " ".join(f"Fact {i}: the tower number {i} in the city was built in {1800 + i} by the council "
                       + "and it stands beside the river near the old market square " * 80 + "." for i in range(20))
    answer = " ".join(f"The tower number {i} was built in {1800 + i}." for i in range(20))
    request = body("annotate", text=answer)
    request["factcheck"].update(context=[context], context_policy="only")
    data = json.dumps(request).encode()
    status, raw, _ = await post(target.url, data)
    ratio = len(raw) / len(data)
    return [Result("amplification", "100 KB context, 20 sentences", status == 200 and ratio < 2.0,
                   f"request {len(data) / 1e3:.0f} KB, response {len(raw) / 1e3:.0f} KB ({ratio:.2f}x)")]


PROBES: dict[str, Callable[[Target], Awaitable[list[Result]]]] = {
    "malformed": malformed, "faults": faults, "limits": limits, "rate": rate, "ws": websocket, "stall": stall,
    "amplification": amplification,
}


# --------------------------------------------------------------------------- running
async def run_probes(checker: str, groups: list[str]) -> list[Result]:
    upstream_runner, upstream_port = await start_site(DemoUpstream().app(), "127.0.0.1", 0)
    overrides = {
        "upstream.url": f"http://127.0.0.1:{upstream_port}/v1", "upstream.read_timeout_s": 2.0,
        "upstream.max_event_bytes": 1024 * 1024, "check.checker": checker, "check.sentence_budget_s": 5.0,
        "server.max_concurrent_streams": 4, "evidence.providers": ["context"], "evidence.context_policy": "only",
    }
    settings = load_settings(**overrides)
    limited = load_settings(**overrides, **{"server.rate_limit_per_minute": 5})
    runners = [upstream_runner]
    try:
        results = []
        for group in groups:
            use = limited if group == "rate" else settings
            runner, port = await start_site(build_app(use), "127.0.0.1", 0)
            runners.append(runner)
            target = Target(f"http://127.0.0.1:{port}/v1", use)
            try:
                results += await PROBES[group](target)
            except Exception as exc:  # noqa: BLE001 - a probe that breaks is a failed probe, reported
                results.append(Result(group, "probe ran", False, f"{type(exc).__name__}: {exc}"))
        return results
    finally:
        for runner in reversed(runners):
            await runner.cleanup()


def print_table(results: list[Result]) -> None:
    width = max(len(r.name) for r in results)
    print(f"{'group':<14} {'probe':<{width}} result  detail")
    for r in results:
        print(f"{r.group:<14} {r.name:<{width}} {'PASS' if r.passed else 'FAIL':<7} {r.detail}")
    failed = sum(not r.passed for r in results)
    print(f"\n{len(results) - failed} passed, {failed} failed")


def main(
    checker: Annotated[str, typer.Option(help="'pipeline' (real checks, context evidence only) or 'none'")] = "pipeline",
    only: Annotated[list[str] | None, typer.Option(help=f"probe groups to run: {', '.join(GROUPS)}")] = None,
) -> None:
    groups = only or list(GROUPS)
    unknown = set(groups) - set(GROUPS)
    if unknown:
        raise typer.BadParameter(f"unknown probe groups {sorted(unknown)}; choose from {', '.join(GROUPS)}")
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    results = asyncio.run(run_probes(checker, groups))
    print_table(results)
    sys.exit(1 if any(not r.passed for r in results) else 0)


if __name__ == "__main__":
    typer.run(main)
