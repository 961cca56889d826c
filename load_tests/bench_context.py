"""Benchmark of grounding in the request's context and of the memory check.

    python -m load_tests.bench_context [--rounds 2] [--index-dir DIR] [--token-rate 40] [--ttft 0.3]
                                       [--distractors 30] [--short-max-tokens 48]

1. Context grounding against index search, per sentence, on the same answers: the scripted
   demo answers (``adapters/demo_answers.yaml``), each with the demo-corpus documents about
   its subject as the request's context (a system message, as a RAG app sends them). Every
   checkable sentence is checked by the assembled pipeline (settings defaults: real
   embedder, slots/hybrid verifier, local demo index) under four conditions, interleaved
   sentence by sentence so machine load hits them alike, each condition on its own
   checker (no shared caches): ``index`` (no context), ``context-only``, ``context-first``,
   ``context-among`` (index + context). Reported: the check's latency and its search stage
   per sentence (p50/p95/mean), the difference to ``index``, and the verdict mix. Run twice:
   with the matching documents only (the demo documents are short), and with
   ``--distractors`` other corpus documents added (a bigger, noisier context).
2. The memory check through the proxy: the same requests streamed through the real app with
   ``factcheck.memory_check`` off and on. The demo upstream streams at ``--token-rate``
   tokens/s after ``--ttft`` s, and answers the closed-book call (non-stream) at the same
   speed (``SimulatedUpstream``), so the extra call's time is that of a model of that speed.
   Reported: the closed-book call's time (``MEMORY_CHECK_LATENCY``), the extra upstream
   tokens (``MEMORY_CHECK_TOKENS``, as the upstream counts them) against the main request's
   (prompt estimated at 4 characters per token, since the demo upstream does not count its
   prompt), the end-to-end time of the stream with and without, the per-sentence ``memory``
   stage, how many sentences got a signal and how many were flagged. Run with
   ``pipeline.memory_max_tokens`` (128) and with ``--short-max-tokens``: a closed-book answer
   of 128 tokens takes as long as the main answer, so early sentences, whose checks wait for
   it at most half their budget, get no signal.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from adapters.demo_upstream import DemoUpstream, _completion, tokenize
from middleware.chat.protocol import ChatRequest
from middleware.checking import check_sentence
from middleware.evidence.index import DEMO_CORPUS, ensure_demo_index
from middleware.evidence.request_passages import request_passages
from middleware.metrics import MEMORY_CHECK_LATENCY, MEMORY_CHECK_TOKENS
from middleware.composition.pipeline import build_pipeline_checker
from middleware.composition import build_app
from middleware.commands.serve import start_site
from middleware.settings import Settings, load_settings
from middleware.sse import SSEParser
from middleware.text.answer_segmenter import segment_text
from middleware.types import CheckContext, Sentence

CONDITIONS = ("index", "context-only", "context-first", "context-among")
CONTEXT_DOCS = 2


@dataclass
class Case:
    question: str
    answer: str
    context: str
    documents: list[str]


def cases(distractors: int = 0) -> list[Case]:
    """Each demo answer with the corpus documents whose file names match most of its keywords,
    followed by ``distractors`` other corpus documents (a bigger, noisier RAG context)."""
    data = yaml.safe_load((Path(__file__).resolve().parent.parent / "adapters" / "demo_answers.yaml").read_text())
    files = sorted(DEMO_CORPUS.rglob("*.md"))
    out = []
    for n, entry in enumerate(data["answers"]):
        keywords = [k.lower().replace(" ", "-") for k in entry["keywords"]]
        scored = sorted(((sum(k in f.stem for k in keywords), f) for f in files), key=lambda s: (-s[0], s[1].name))
        chosen = [f for hits, f in scored if hits][:CONTEXT_DOCS]
        others = [f for hits, f in scored if not hits]
        chosen += [others[(n * 7919 + 104729 * i) % len(others)] for i in range(distractors)]
        context = "\n\n".join(f.read_text(encoding="utf-8") for f in chosen)
        out.append(Case(entry["question"], entry["answer"], context, [f.name for f in chosen]))
    return out


def request_body(case: Case, **extra: Any) -> dict[str, Any]:
    return {"model": "factcheck-demo", "messages": [
        {"role": "system", "content": f"Answer from these documents.\n\n{case.context}"},
        {"role": "user", "content": case.question}], **extra}


def percentiles(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    p = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return f"p50 {p(0.5):7.1f}  p95 {p(0.95):7.1f}  mean {statistics.fmean(ordered):7.1f}"


def sentences_of(text: str) -> list[Sentence]:
    """The checkable sentences of an answer, numbered as the checked stream numbers them."""
    checkable = [s for s in segment_text(text) if s.checkable]
    return [Sentence(index=i, start=s.start, end=s.end, text=s.text, code_spans=s.code_spans)
            for i, s in enumerate(checkable)]


# ------------------------------------------------------------------ 1. context vs index
async def bench_grounding(settings: Settings, rounds: int, distractors: int) -> None:
    checkers = {c: build_pipeline_checker(settings) for c in CONDITIONS}
    work = []
    answers = cases(distractors)
    for case in answers:
        t0 = time.perf_counter()
        passages = request_passages(ChatRequest.model_validate({"messages": request_body(case)["messages"]}))
        split_ms = (time.perf_counter() - t0) * 1000
        for sentence in sentences_of(case.answer):
            previous = [s.text for s in sentences_of(case.answer)[: sentence.index]]
            work.append((sentence, passages, previous, split_ms, len(case.context)))
    print(f"\n## 1. Context grounding vs index search ({len(work)} sentences of {len(answers)} demo answers, "
          f"{rounds} rounds; context = up to {CONTEXT_DOCS} matching corpus documents + {distractors} others per "
          f"answer: {statistics.fmean(w[4] for w in work) / 1000:.1f} kB, "
          f"{statistics.fmean(len(w[1]) for w in work):.0f} passages on average, split once per request in "
          f"{statistics.fmean(w[3] for w in work):.1f} ms)")
    work = [w[:3] for w in work]
    warm = build_pipeline_checker(settings)
    for sentence, passages, previous in work:  # parse caches and model sessions warm for every condition
        await check_sentence(warm, sentence, CheckContext(previous=previous, request_passages=passages,
                                                options={"context_policy": "among"}))
    total: dict[str, list[float]] = {c: [] for c in CONDITIONS}
    search: dict[str, list[float]] = {c: [] for c in CONDITIONS}
    verdicts: dict[str, Counter[str]] = {c: Counter() for c in CONDITIONS}
    checked: dict[str, list[float]] = {c: [] for c in CONDITIONS}
    for r in range(rounds):
        for i, (sentence, passages, previous) in enumerate(work):
            order = CONDITIONS[(i + r) % 4:] + CONDITIONS[: (i + r) % 4]
            for condition in order:
                context = _context(condition, passages, previous)
                t0 = time.perf_counter()
                report = await check_sentence(checkers[condition], sentence, context)
                elapsed = (time.perf_counter() - t0) * 1000
                total[condition].append(elapsed)
                if report.verdict.label != "skipped":
                    checked[condition].append(elapsed)
                    search[condition].append(report.timings_ms.get("search", 0.0))
                if r == 0:
                    verdicts[condition][report.verdict.label] += 1
    base = statistics.median(checked["index"])
    base_search = statistics.median(search["index"])
    print("\nper checked sentence, ms (skipped sentences left out):")
    for condition in CONDITIONS:
        print(f"  {condition:14s} check  {percentiles(checked[condition])}   search {percentiles(search[condition])}")
        if condition != "index":
            print(f"  {'':14s} vs index: check p50 {statistics.median(checked[condition]) - base:+.1f} ms, "
                  f"search p50 {statistics.median(search[condition]) - base_search:+.1f} ms")
    print("\nverdicts (round 1):")
    for condition in CONDITIONS:
        print(f"  {condition:14s} {dict(sorted(verdicts[condition].items()))}")


def _context(condition: str, passages, previous) -> CheckContext:
    if condition == "index":
        return CheckContext(previous=previous)
    policy = condition.removeprefix("context-")
    return CheckContext(previous=previous, request_passages=passages, options={"context_policy": policy})


# ------------------------------------------------------------------ 2. memory check cost
class SimulatedUpstream(DemoUpstream):
    """The demo upstream whose non-stream answers take as long as streaming them would."""

    def __init__(self, token_rate: float, ttft: float) -> None:
        super().__init__(default_rate=token_rate)
        self.ttft = ttft

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        script = self.script_for(body)
        model = body.get("model") or "factcheck-demo"
        if body.get("stream"):
            return await self._stream(request, body, script, model)
        text = script.text
        while len(tokenize(text)) > int(body.get("max_tokens") or 10**6):  # cut at max_tokens, as a model does
            text = text.rsplit(" ", 1)[0]
        await asyncio.sleep(self.ttft + len(tokenize(text)) / script.token_rate)
        return web.json_response(_completion(text, model))


async def stream_once(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[float, list[dict]]:
    t0 = time.perf_counter()
    async with session.post(f"{url}/chat/completions", json=body) as response:
        raw = await response.read()
    elapsed = time.perf_counter() - t0
    parser = SSEParser()
    reports = []
    for event in parser.feed(raw) + parser.flush():
        if event.data and not event.is_done:
            chunk = event.json()
            if chunk.get("factcheck", {}).get("type") == "sentence":
                reports.append(chunk["factcheck"]["report"])
    return elapsed, reports


async def start_proxy(upstream: DemoUpstream, settings: Settings) -> tuple[list[web.AppRunner], str]:
    """``upstream`` and the proxy (the assembled pipeline) in front of it, on loopback: the
    runners to clean up (proxy first) and the proxy's base URL."""
    up_runner, up_port = await start_site(upstream.app(), "127.0.0.1", 0)
    settings = settings.model_copy(update={"upstream": settings.upstream.model_copy(
        update={"url": f"http://127.0.0.1:{up_port}/v1"})})
    app = build_app(settings, checker=build_pipeline_checker(settings))
    runner, port = await start_site(app, "127.0.0.1", 0)
    return [runner, up_runner], f"http://127.0.0.1:{port}/v1"


async def bench_memory(settings: Settings, token_rate: float, ttft: float, rounds: int) -> None:
    upstream = SimulatedUpstream(token_rate, ttft)
    runners, url = await start_proxy(upstream, settings)
    all_cases = cases()
    wall: dict[bool, list[float]] = {False: [], True: []}
    stage, signals, flagged, sentences, unverified = [], 0, 0, 0, 0
    main_tokens, main_prompt_estimate, closed_prompt_estimate = 0, 0, 0
    tokens0, calls0, seconds0 = _memory_metrics()
    try:
        async with aiohttp.ClientSession() as session:
            for r in range(rounds):
                for i, case in enumerate(all_cases):
                    for memory in ((False, True) if (i + r) % 2 == 0 else (True, False)):
                        mock = {"text": case.answer, "first_token_delay": ttft, "closed_book_text": case.answer}
                        body = request_body(case, stream=True, mock=mock,
                                            factcheck={"mode": "annotate", "memory_check": memory})
                        elapsed, reports = await stream_once(session, url, body)
                        wall[memory].append(elapsed * 1000)
                        if memory:
                            sentences += len(reports)
                            unverified += sum(r["verdict"]["label"] == "unverified" for r in reports)
                            for report in reports:
                                if report["memory"] is not None:
                                    signals += 1
                                    flagged += report["memory"]["flagged"]
                                    stage.append(report["timings_ms"].get("memory", 0.0))
                            main_tokens += len(tokenize(case.answer))
                            main_prompt_estimate += sum(len(m["content"]) for m in body["messages"]) // 4
                            closed_prompt_estimate += len(case.question) // 4
    finally:
        for runner in runners:
            await runner.cleanup()
    tokens, calls, seconds = (now - before for now, before in zip(_memory_metrics(), (tokens0, calls0, seconds0),
                                                                     strict=True))
    requests = rounds * len(all_cases)
    print(f"\n## 2. Memory check ({requests} streamed requests with it, {requests} without; upstream {token_rate:g} "
          f"tokens/s after {ttft:g} s, closed-book max_tokens {settings.pipeline.memory_max_tokens})")
    print(f"closed-book call: {calls:.0f} calls, mean {seconds / max(calls, 1) * 1000:.0f} ms each")
    print(f"extra upstream tokens per request: {tokens / max(calls, 1):.0f} as counted by the upstream "
          f"(prompt ~{closed_prompt_estimate / requests:.0f} estimated + completion); the main request: "
          f"~{main_prompt_estimate / requests:.0f} prompt (estimated) + {main_tokens / requests:.0f} completion")
    print(f"stream end to end, ms: without {percentiles(wall[False])}")
    print(f"                       with    {percentiles(wall[True])}")
    print(f"per-sentence memory stage (wait for the closed-book answer + embeddings), ms: {percentiles(stage)}")
    print(f"sentence reports: {sentences} ({unverified} unverified), with a memory signal: {signals}, "
          f"flagged: {flagged}")


def _memory_metrics() -> tuple[float, float, float]:
    samples = {s.name: s.value for s in MEMORY_CHECK_LATENCY.collect()[0].samples}
    count = next(v for k, v in samples.items() if k.endswith("_count"))
    total = next(v for k, v in samples.items() if k.endswith("_sum"))
    return MEMORY_CHECK_TOKENS._value.get(), count, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--index-dir", type=Path, default=None, help="demo index (default: settings)")
    parser.add_argument("--token-rate", type=float, default=40.0, help="simulated upstream tokens/s")
    parser.add_argument("--ttft", type=float, default=0.3, help="simulated upstream time to first token (s)")
    parser.add_argument("--distractors", type=int, default=30, help="other corpus documents in the large context")
    parser.add_argument("--short-max-tokens", type=int, default=48,
                        help="memory check run again with this closed-book max_tokens")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the hybrid verifier's fallback warning would repeat per checker
    overrides = {"evidence.index_dir": str(args.index_dir)} if args.index_dir else {}
    settings = load_settings(**overrides)
    t0 = time.perf_counter()
    ensure_demo_index(settings.evidence.index_dir, settings=settings)
    print(f"demo index at {settings.evidence.index_dir} ready in {time.perf_counter() - t0:.1f} s; "
          f"verifier {settings.pipeline.verifier}, embedder {settings.runtime.embed_model}")
    for distractors in (0, args.distractors):
        asyncio.run(bench_grounding(settings, args.rounds, distractors))
    for max_tokens in (settings.pipeline.memory_max_tokens, args.short_max_tokens):
        short = settings.model_copy(update={"pipeline": settings.pipeline.model_copy(update={"memory_max_tokens": max_tokens})})
        asyncio.run(bench_memory(short, args.token_rate, args.ttft, max(1, args.rounds - 1)))


if __name__ == "__main__":
    main()

