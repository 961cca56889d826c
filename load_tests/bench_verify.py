"""Verification latency on streaming-sized inputs: one claim against five 4-sentence
passages, as the checker sees them after search. Claims are sentences of the packaged demo
corpus, half of them with a number changed. The first pass over new claims is cold (parse,
embed, score); the second repeats them (caches).

    python -m load_tests.bench_verify --backend slots --backend nli --concurrency 1 --concurrency 8
"""

from __future__ import annotations

import asyncio
import random
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from middleware.evidence.index import DEMO_CORPUS
from middleware.composition.backends import build_verifier
from middleware.text.evidence_sentences import split_sentences
from middleware.pipeline.verifiers import Verifier, passages_from_texts
from middleware.settings import load_settings


@dataclass(frozen=True)
class Case:
    claim: str
    evidence: list[str]


def demo_cases(n: int, seed: int = 0, corpus: Path = DEMO_CORPUS, passages_per_claim: int = 5) -> list[Case]:
    passages: list[str] = []
    for path in sorted(corpus.rglob("*.md")):
        for paragraph in path.read_text(encoding="utf-8").split("\n\n"):
            if paragraph.startswith("#") or not paragraph.strip():
                continue
            spans = split_sentences(paragraph)
            for i in range(0, len(spans), 4):
                chunk = spans[i : i + 4]
                passages.append(paragraph[chunk[0][0] : chunk[-1][1]])
    if not passages:
        raise FileNotFoundError(f"no demo corpus under {corpus}")
    rng = random.Random(seed)
    cases = []
    for k in range(n):
        home = rng.choice(passages)
        spans = split_sentences(home)
        start, end = rng.choice(spans)
        claim = home[start:end]
        if k % 2:
            claim = re.sub(r"\d", lambda m: str((int(m.group()) + 3) % 10), claim, count=1)
        others = rng.sample(passages, passages_per_claim - 1)
        evidence = [home, *others]
        rng.shuffle(evidence)
        cases.append(Case(claim, evidence))
    return cases


async def bench(verifier: Verifier, cases: list[Case], concurrency: int = 1) -> dict[str, float]:
    """Per-claim verification latency (ms): p50, p95, mean; claims/s at ``concurrency``."""
    semaphore = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(case: Case) -> None:
        async with semaphore:
            t0 = time.perf_counter()
            await verifier.verify(case.claim, passages_from_texts(case.evidence))
            latencies.append((time.perf_counter() - t0) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(one(c) for c in cases))
    wall = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "p50_ms": statistics.median(ordered),
        "p95_ms": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "mean_ms": statistics.fmean(ordered),
        "claims_per_s": len(cases) / wall,
    }


def main(
    backend: Annotated[
        list[str] | None, typer.Option(help="verifier backend: slots, nli, hybrid or llm; repeatable")
    ] = None,
    n: Annotated[int, typer.Option(help="claims per run")] = 100,
    concurrency: Annotated[
        list[int] | None, typer.Option(help="concurrent verifications; repeatable")
    ] = None,
) -> None:
    """Per-claim verification latency, cold then warm, per backend and concurrency."""
    typer.echo(f"{'backend':8} {'conc':>4} {'pass':5} {'p50 ms':>8} {'p95 ms':>8} {'claims/s':>9}")

    async def run() -> None:
        settings = load_settings()
        for b, name in enumerate(backend or ["slots"]):
            verifier = build_verifier(settings, name)
            warmup = demo_cases(1, seed=-1)[0]
            await verifier.verify(warmup.claim, passages_from_texts(warmup.evidence))  # load models
            for level in concurrency or [1]:
                cases = demo_cases(n, seed=1000 * b + level)  # new claims: the first pass is cold
                for label in ("cold", "warm"):
                    stats = await bench(verifier, cases, level)
                    typer.echo(
                        f"{verifier.name:8} {level:4d} {label:5} {stats['p50_ms']:8.1f} {stats['p95_ms']:8.1f} "
                        f"{stats['claims_per_s']:9.1f}"
                    )

    asyncio.run(run())


if __name__ == "__main__":
    typer.run(main)
