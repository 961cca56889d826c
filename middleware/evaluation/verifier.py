"""Evaluation of a verifier, behind ``factcheck eval-verifier``:

- a verifier backend (slots, nli, hybrid, llm) on public claim/evidence sets (WiCE,
  FEVER-Symmetric) through the product's own ``Verifier`` interface, so the evidence is
  windowed exactly as in serving: WiCE's cited page as 4-sentence passages (the local
  index's passages), each passage windowed by the backend itself; scored by balanced
  accuracy of attributable vs not, which is what the product acts on (support or flag);
- an exported NLI model on the held-out dev split of its training run (3-way accuracy per
  source) and its CPU latency per pair.

The exported model runs through the project runtime (manifest, tokenizer, onnxruntime
session); no torch import here.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING


from middleware.training.claim_sets import Example
from middleware.training.metrics import balanced_accuracy, dev_metrics
from middleware.training.shipping import OnnxNli
from middleware.training.verifier_data import Pair

if TYPE_CHECKING:
    from middleware.pipeline.verifiers import Verifier


# --- a verifier backend on claim/evidence sets ----------------------------------------------


@dataclass
class Result:
    dataset: str
    backend: str
    gold: list[str] = field(default_factory=list)
    predicted: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def n(self) -> int:
        return len(self.gold)

    @property
    def balanced_accuracy(self) -> float:
        """Balanced accuracy of 'attributable' against everything else."""
        return balanced_accuracy([g == "attributable" for g in self.gold], [p == "attributable" for p in self.predicted])

    @property
    def three_way_accuracy(self) -> float:
        return sum(g == p for g, p in zip(self.gold, self.predicted, strict=True)) / max(1, self.n)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for label in self.predicted:
            out[label] = out.get(label, 0) + 1
        return out

    def summary(self) -> dict[str, object]:
        return {
            "balanced_accuracy": round(self.balanced_accuracy, 4),
            "three_way_accuracy": round(self.three_way_accuracy, 4),
            "records": self.n,
            "ms_per_claim": round(1000 * self.seconds / max(1, self.n), 1),
            "predicted": self.counts(),
        }


async def evaluate(verifier: Verifier, examples: list[Example], dataset: str, concurrency: int = 4) -> Result:
    from middleware.pipeline.verifiers import passages_from_texts

    result = Result(dataset, verifier.name)
    semaphore = asyncio.Semaphore(concurrency)

    async def one(example: Example) -> str:
        async with semaphore:
            verdict = await verifier.verify(example.claim, passages_from_texts(example.evidence))
            return verdict.label

    started = time.perf_counter()
    labels = await asyncio.gather(*(one(e) for e in examples))
    result.seconds = time.perf_counter() - started
    result.gold = [e.gold for e in examples]
    result.predicted = list(labels)
    return result


# --- an exported NLI model on its training run's dev split -----------------------------------


def evaluate_dev(model: OnnxNli, pairs: Sequence[Pair]) -> dict[str, float]:
    probs = model.probs([(p.premise, p.hypothesis) for p in pairs])
    return {k: round(v, 4) for k, v in dev_metrics(pairs, probs).items()} | {"pairs": len(pairs)}


def measure_latency(model: OnnxNli, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> dict[str, float]:
    """Milliseconds per pair: one pair per call (p50, mean) and batches of ``batch_size``."""
    model.probs(pairs[:batch_size], batch_size)  # warm-up
    single = []
    for pair in pairs:
        t0 = time.perf_counter()
        model.probs([pair], 1)
        single.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    model.probs(pairs, batch_size)
    batched = (time.perf_counter() - t0) * 1000 / len(pairs)
    return {
        "unbatched_ms_p50": round(statistics.median(single), 2),
        "unbatched_ms_mean": round(statistics.fmean(single), 2),
        "batched_ms_per_pair": round(batched, 2),
        "batch_size": batch_size,
        "pairs": len(pairs),
    }
