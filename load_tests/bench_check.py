"""Per-sentence check latency of the offline default pipeline (issue 5's benchmark).

Checks every sentence of the scripted demo answers, as streams would: ``streams`` answers at
once, each answer's sentences submitted through the same CheckRunner the proxy uses
(per-stream and global concurrency caps), with a generous budget so the figure is the real
check time, not the budget. A warm-up pass runs first (model sessions, spaCy, caches are
then warm as in a running server); a second, cold-cache pass uses answers with their
numbers changed, so the search and embedding caches cannot answer. ``cpu ms/check`` is the
process's CPU time (every thread: event loop, parse and model threads) over the pass divided by
the checks it completed: the cost of a check, whatever the machine's other load does to the
wall-clock figures.

    python -m load_tests.bench_check --streams 1,20 [--mode correct] [--documents 3]

``--documents N``: each answer's request brings its own documents, as a RAG app's would: the
N demo corpus files sharing the most words with the answer, searched alone
(``context_policy: only``), so the figure includes reading a request's context whole
(``evidence.context_whole_chars``).
"""

from __future__ import annotations

import asyncio
import re
import resource
import statistics
import time
from typing import Annotated

import typer

from middleware.checking import CheckRunner
from middleware.text.answer_segmenter import segment_text
from middleware.settings import load_settings
from middleware.types import CheckContext, Mode, Passage, Sentence


def _sentences(text: str) -> list[Sentence]:
    checkable = [s for s in segment_text(text) if s.checkable]
    return [Sentence(index=i, start=s.start, end=s.end, text=s.text) for i, s in enumerate(checkable)]


def _shift_numbers(text: str, by: int) -> str:
    return re.sub(r"\b(1[5-9]\d\d|20\d\d)\b", lambda m: str(int(m.group()) + by), text)


def _documents(answer: str, corpus: dict[str, str], n: int) -> list[Passage]:
    """The ``n`` corpus files sharing the most words with ``answer``, cut like a request's context."""
    from middleware.evidence.request_passages import ContextText, context_passages

    words = set(re.findall(r"\w+", answer.lower()))
    ranked = sorted(corpus, key=lambda name: -len(words & set(re.findall(r"\w+", corpus[name].lower()))))
    return context_passages([ContextText(f"factcheck.context[{i}]", corpus[name]) for i, name in enumerate(ranked[:n])])


async def _one_answer(runner: CheckRunner, text: str, latencies: list[float], mode: Mode = Mode.ANNOTATE,
                      documents: list[Passage] | None = None) -> None:
    options = {"context_policy": "only"} if documents else {}
    checks = runner.session(CheckContext(mode=mode, request_passages=documents or [], options=options))
    sentences = _sentences(text)
    started: dict[int, float] = {}
    for sentence in sentences:
        started[sentence.index] = time.perf_counter()
        previous = [s.text for s in sentences[: sentence.index]]
        task = checks.submit(sentence, previous)
        task.add_done_callback(lambda t, i=sentence.index: latencies.append(time.perf_counter() - started[i]))
    await checks.wait_all()
    checks.close()


async def _run(
    runner: CheckRunner, answers: list[str], streams: int, mode: Mode = Mode.ANNOTATE,
    documents: dict[str, list[Passage]] | None = None,
) -> tuple[list[float], float]:
    latencies: list[float] = []
    t0 = time.perf_counter()
    batch = [answers[i % len(answers)] for i in range(max(streams, len(answers)))]
    given = documents or {}
    for start in range(0, len(batch), streams):
        await asyncio.gather(*(_one_answer(runner, a, latencies, mode, given.get(a)) for a in batch[start : start + streams]))
    return latencies, time.perf_counter() - t0


def process_cpu_s() -> float:
    """CPU seconds (user + system) of this process so far, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return 1000 * values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main(
    streams: Annotated[str, typer.Option(help="comma-separated concurrent streams")] = "1,20",
    mode: Annotated[Mode, typer.Option(help="annotate, or correct (contradicted sentences are also edited)")] = Mode.ANNOTATE,
    documents: Annotated[int, typer.Option(help="demo corpus files each answer's request brings as its context (0: none)")] = 0,
) -> None:
    from adapters.demo_upstream import DemoAnswers
    from middleware.evidence.index import DEMO_CORPUS, ensure_demo_index
    from middleware.composition.pipeline import build_pipeline_checker

    settings = load_settings()
    ensure_demo_index(settings.evidence.index_dir, settings=settings)
    checker = build_pipeline_checker(settings)
    check_settings = settings.check.model_copy(update={"sentence_budget_s": 60.0})
    answers = [a["answer"] for a in DemoAnswers.load().answers]
    corpus = {str(p): p.read_text(encoding="utf-8") for p in sorted(DEMO_CORPUS.rglob("*.md")) if p.name != "README.md"}

    def with_documents(texts: list[str]) -> dict[str, list[Passage]] | None:
        return {t: _documents(t, corpus, documents) for t in texts} if documents else None
    print("| streams | pass | sentences | p50 ms | p95 ms | max ms | sentences/s | cpu ms/check |")
    print("|---|---|---|---|---|---|---|---|")

    async def bench() -> None:
        runner = CheckRunner(checker, check_settings)
        await _run(runner, answers, 4, mode, with_documents(answers))  # warm-up: sessions, spaCy, caches
        for n in [int(s) for s in streams.split(",")]:
            for label, texts in (("warm", answers), ("cold", [_shift_numbers(a, n) for a in answers])):
                given = with_documents(texts)
                cpu = process_cpu_s()
                latencies, elapsed = await _run(runner, texts, n, mode, given)
                cpu_ms = 1000 * (process_cpu_s() - cpu) / len(latencies)
                print(f"| {n} | {label} | {len(latencies)} | {statistics.median(latencies) * 1000:.0f} | "
                      f"{_pct(latencies, 0.95):.0f} | {max(latencies) * 1000:.0f} | {len(latencies) / elapsed:.1f} | "
                      f"{cpu_ms:.1f} |")

    asyncio.run(bench())


if __name__ == "__main__":
    typer.run(main)
