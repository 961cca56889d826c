"""Per-sentence ``claims`` time against the length of the prompt (issue 22, item 5).

    python -m load_tests.bench_prompt [--sizes 0.1,5,20] [--rounds 2] [--token-rate 40]

The scripted demo answers (``adapters/demo_answers.yaml``: Curie, Eiffel, Apollo, ...) are
streamed through the real proxy (the assembled pipeline, settings defaults, local demo index)
by the demo upstream at ``--token-rate`` tokens/s, each asked with a user message of about
each size in KB: demo-corpus documents pasted before the question, as a user who pastes
documents does. Every request's prompt is its own (the documents start at another offset), so
no cache holds a prompt from an earlier request. The budget is generous (30 s) so the figures
are the stages' real times, not the budget.

Printed per prompt size: the median (and p95, max) of the per-sentence ``claims`` stage over
every checked sentence; the ``prepare`` stage where the pipeline reports one (the wait of a
check for its request's one-time preparation of the prompt, absent before issue 22); and the
whole check's median.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import statistics
import time
from collections.abc import Sequence

import aiohttp

from adapters.demo_upstream import DemoAnswers, DemoUpstream
from load_tests.bench_context import start_proxy, stream_once
from middleware.evidence.index import DEMO_CORPUS, ensure_demo_index
from middleware.settings import load_settings

BUDGET_S = 30.0


def documents() -> str:
    return "\n\n".join(f.read_text(encoding="utf-8") for f in sorted(DEMO_CORPUS.rglob("*.md")))


def prompt(question: str, size_chars: int, offset: int, corpus: str) -> str:
    """About ``size_chars`` characters: documents from ``offset`` on, then the question."""
    room = max(0, size_chars - len(question) - 2)
    pasted = (corpus[offset:] + "\n\n" + corpus)[:room]
    return f"{pasted}\n\n{question}" if pasted else question


def spread(values: Sequence[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {statistics.median(ordered):7.1f}  p95 {p95:7.1f}  max {ordered[-1]:7.1f}"


async def bench(sizes_kb: list[float], rounds: int, token_rate: float) -> None:
    settings = load_settings(**{"check.sentence_budget_s": BUDGET_S})
    ensure_demo_index(settings.evidence.index_dir, settings=settings)
    runners, url = await start_proxy(DemoUpstream(default_rate=token_rate), settings)
    answers = [(a["question"], a["answer"]) for a in DemoAnswers.load().answers[:3]]
    corpus = documents()
    offsets = itertools.count(0, 997)
    claims: dict[float, list[float]] = {s: [] for s in sizes_kb}
    prepare: dict[float, list[float]] = {s: [] for s in sizes_kb}
    check: dict[float, list[float]] = {s: [] for s in sizes_kb}
    unverified = 0

    async def one(session: aiohttp.ClientSession, size: float, question: str, answer: str) -> list[dict]:
        text = prompt(question, int(size * 1000), next(offsets) % len(corpus), corpus)
        body = {"model": "factcheck-demo", "stream": True, "messages": [{"role": "user", "content": text}],
                "mock": {"text": answer}, "factcheck": {"mode": "annotate"}}
        _, reports = await stream_once(session, url, body)
        return reports

    try:
        async with aiohttp.ClientSession() as session:
            for question, answer in answers:  # model sessions, spaCy and the index warm, as in a running server
                await one(session, sizes_kb[0], question, answer)
            for r in range(rounds):
                for i, (question, answer) in enumerate(answers):
                    order = sizes_kb[(i + r) % len(sizes_kb):] + sizes_kb[: (i + r) % len(sizes_kb)]
                    for size in order:  # interleaved, so machine load hits every size alike
                        for report in await one(session, size, question, answer):
                            timings = report["timings_ms"]
                            unverified += report["verdict"]["label"] == "unverified"
                            if "claims" not in timings:
                                continue
                            claims[size].append(timings["claims"])
                            check[size].append(sum(timings.values()))
                            if "prepare" in timings:
                                prepare[size].append(timings["prepare"])
    finally:
        for runner in runners:
            await runner.cleanup()
    print(f"\nper-sentence stages, ms ({rounds} rounds x {len(answers)} demo answers per size, streamed at "
          f"{token_rate:g} tokens/s, prompt = pasted demo-corpus documents + the question; "
          f"{unverified} unverified sentences)")
    for size in sizes_kb:
        print(f"  {size:5g} KB  claims  {spread(claims[size])}   ({len(claims[size])} sentences)")
        print(f"  {'':8s} prepare {spread(prepare[size])}   ({len(prepare[size])} sentences waited)")
        print(f"  {'':8s} check   {spread(check[size])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="0.1,5,20", help="prompt sizes in KB, comma-separated")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--token-rate", type=float, default=40.0, help="demo upstream tokens/s")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    t0 = time.perf_counter()
    asyncio.run(bench([float(s) for s in args.sizes.split(",")], args.rounds, args.token_rate))
    print(f"\n(ran {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
