"""Pair-scorer throughput by provider and precision, alone and through the micro-batcher, with
parity against the CPU.

For each precision asked for, the NLI model is loaded on ``--provider`` and scores the same
claim/evidence pairs (sentences of the packaged demo corpus against 4-sentence passages, half
the claims with a number changed) two ways:

- ``score_sync``: big length-sorted batches, no batcher (the model's own ceiling);
- the micro-batcher: ``--concurrency`` callers each awaiting one pair at a time, as streams do.

Parity compares each run's probabilities with the CPU running ``--reference`` (default int8,
the CPU default): largest absolute difference, the same for logits (read back from the
probabilities as centred log-probabilities, which drops the softmax's shift), argmax agreement,
and agreement of the
calibrated decisions (supported at the manifest's entailment threshold, contradicted at its
contradiction threshold). Figures are medians over ``--rounds``.

    python -m load_tests.bench_scorer --provider cpu --precision int8 --precision fp32
    python -m load_tests.bench_scorer --provider cuda --precision fp32 --precision fp16 --json out.json
    python -m load_tests.bench_scorer --precision int8 --reference fp32 --battery 80 --rounds 1
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from prometheus_client import REGISTRY

from middleware.runtime import clear_models, load_pair_scorer
from middleware.runtime.scorer import OnnxPairScorer
from middleware.settings import RuntimeSettings, load_settings
from onnx_models.manifest import Decision


def demo_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (evidence passage, claim) pairs from the demo corpus."""
    from load_tests.bench_verify import demo_cases  # the pipeline's imports (spaCy ...), only here

    pairs: list[tuple[str, str]] = []
    for case in demo_cases((n + 4) // 5, seed=seed):
        pairs += [(passage, case.claim) for passage in case.evidence]
    return pairs[:n]


def battery_pairs(n: int, data_root: Path = Path("../shared/data")) -> list[tuple[str, str]]:
    """(evidence, claim) pairs of the quality battery: ``n`` items of each set, sampled as
    ``factcheck eval-battery`` samples its test split, each claim against its evidence passages
    joined (the tokenizer keeps the model's first tokens)."""
    from middleware.training.claim_sets import ALL_SETS, load_set, sample

    return [(" ".join(item.evidence), item.claim)
            for name in ALL_SETS for item in sample(load_set(data_root, name), "test", n)]


def _settings(provider: str, precision: str, model: str) -> RuntimeSettings:
    update: dict[str, Any] = {"provider": provider, "precision": precision, "nli_model": model}
    return load_settings().runtime.model_copy(update=update)


def sync_rate(scorer: OnnxPairScorer, pairs: list[tuple[str, str]], batch_size: int) -> tuple[float, np.ndarray]:
    started = time.perf_counter()
    probs = scorer.score_sync(pairs, batch_size=batch_size)
    return len(pairs) / (time.perf_counter() - started), probs


def _batcher_totals(name: str) -> tuple[float, float, float]:
    """(inferences, items, seconds in inference) the batcher of model ``name`` has run so far."""
    labels = {"model": name}
    value = REGISTRY.get_sample_value
    return (value("factcheck_batch_size_count", labels) or 0.0, value("factcheck_batch_size_sum", labels) or 0.0,
            value("factcheck_inference_seconds_sum", labels) or 0.0)


async def batched_rate(
    scorer: OnnxPairScorer, pairs: list[tuple[str, str]], concurrency: int
) -> tuple[float, dict[str, float]]:
    """Pairs/s with ``concurrency`` callers, each awaiting one pair at a time, and the
    batcher's mean batch size and share of the wall time spent in inference."""
    queue = list(reversed(pairs))

    async def caller() -> None:
        while queue:
            await scorer.score([queue.pop()])

    before = _batcher_totals(scorer.name)
    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    runs, items, busy = (after - first for after, first in zip(_batcher_totals(scorer.name), before, strict=True))
    return len(pairs) / wall, {"mean_batch": items / max(runs, 1.0), "inference_share": busy / wall}


def thresholds(decision: Decision | None) -> tuple[float, float]:
    """The calibrated P(entailment) and P(contradiction) thresholds (0.5 each without a decision)."""
    return (decision.entailment, decision.contradiction) if decision else (0.5, 0.5)


def parity(
    probs: np.ndarray, reference: np.ndarray, labels: list[str], entail: float = 0.5, contra: float = 0.5
) -> dict[str, float]:
    """How far ``probs`` are from ``reference`` (rows of NLI probabilities in ``labels`` order):
    largest probability and centred-logit differences, and the shares of rows with the same argmax
    and the same decisions at the ``entail`` and ``contra`` thresholds."""
    e, c = labels.index("entailment"), labels.index("contradiction")
    return {
        "max_abs_diff": float(np.abs(probs - reference).max()),
        "max_logit_diff": float(np.abs(_centred_logits(probs) - _centred_logits(reference)).max()),
        "argmax_agreement": float((probs.argmax(1) == reference.argmax(1)).mean()),
        "decision_agreement": float(
            ((probs[:, e] >= entail) == (reference[:, e] >= entail)).mean() * 0.5
            + ((probs[:, c] >= contra) == (reference[:, c] >= contra)).mean() * 0.5
        ),
    }


def _centred_logits(probs: np.ndarray) -> np.ndarray:
    logs = np.log(np.clip(probs, 1e-30, None))
    return logs - logs.mean(1, keepdims=True)


def measure(
    model: str, provider: str, precision: str, pairs: list[tuple[str, str]], concurrency: int, rounds: int,
    batch_size: int, reference: np.ndarray | None,
) -> dict[str, Any]:
    scorer = load_pair_scorer(model, "nli", _settings(provider, precision, model))
    scorer.score_sync(pairs[:64], batch_size=batch_size)  # warm up (CUDA kernels, arenas)
    sync, batched, shapes, probs = [], [], [], None
    for _ in range(rounds):
        passes = [sync_rate(scorer, pairs, batch_size) for _ in range(3)]  # one pass is short on a GPU
        sync.append(statistics.median(rate for rate, _ in passes))
        probs = passes[-1][1]
        through, shape = asyncio.run(batched_rate(scorer, pairs, concurrency))
        batched.append(through)
        shapes.append(shape)
    assert probs is not None
    row: dict[str, Any] = {
        "provider": scorer.session.provider, "precision": scorer.session.precision,
        "file": scorer.session.path.name,
        "sync_pairs_per_s": statistics.median(sync), "batched_pairs_per_s": statistics.median(batched),
    }
    row["batched_over_sync"] = row["batched_pairs_per_s"] / row["sync_pairs_per_s"]
    for key in ("mean_batch", "inference_share"):
        row[key] = statistics.median(shape[key] for shape in shapes)
    if reference is not None:
        row.update(parity(probs, reference, scorer.labels, *thresholds(scorer.manifest.decision)))
    clear_models()
    return row


def main(
    provider: Annotated[str, typer.Option(help="cpu, cuda or auto")] = "cpu",
    precision: Annotated[list[str] | None, typer.Option(help="int8, fp32, fp16 or auto; repeatable")] = None,
    model: Annotated[str, typer.Option(help="NLI export (default: the bundled verifier)")] = "bundled",
    reference: Annotated[str, typer.Option(help="CPU precision the parity columns compare with")] = "int8",
    pairs: Annotated[int, typer.Option(help="claim/evidence pairs")] = 2048,
    concurrency: Annotated[int, typer.Option(help="callers through the micro-batcher")] = 128,
    rounds: Annotated[int, typer.Option(help="repeats; medians are reported")] = 3,
    batch_size: Annotated[int, typer.Option(help="score_sync batch size")] = 64,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the rows here")] = None,
    pairs_file: Annotated[
        Path | None, typer.Option(help="read the pairs from this JSON list (written by --save-pairs) instead")
    ] = None,
    save_pairs: Annotated[Path | None, typer.Option(help="write the pairs as a JSON list and stop")] = None,
    battery: Annotated[
        int, typer.Option(help="instead: this many pairs of each quality-battery set (../shared/data)")
    ] = 0,
) -> None:
    """Pairs/s of score_sync and through the micro-batcher, and parity with the CPU."""
    if battery:
        data = battery_pairs(battery)
    elif pairs_file:
        data = [(a, b) for a, b in json.loads(pairs_file.read_text(encoding="utf-8"))][:pairs]
    else:
        data = demo_pairs(pairs)
    if save_pairs:
        save_pairs.write_text(json.dumps(data), encoding="utf-8")
        return
    ref_scorer = load_pair_scorer(model, "nli", _settings("cpu", reference, model))
    ref = ref_scorer.score_sync(data, batch_size=batch_size)
    clear_models()
    rows = [measure(model, provider, p, data, concurrency, rounds, batch_size, ref) for p in precision or ["auto"]]
    typer.echo(f"{len(data)} pairs, {concurrency} callers, parity against CPU {reference}")
    typer.echo(f"{'provider':22} {'precision':9} {'file':26} {'sync/s':>8} {'batched/s':>9} {'ratio':>6} "
               f"{'batch':>5} {'busy':>5} {'max diff':>8} {'logits':>6} {'argmax':>7} {'decision':>8}")
    for r in rows:
        typer.echo(f"{r['provider']:22} {r['precision']:9} {r['file']:26} {r['sync_pairs_per_s']:8.0f} "
                   f"{r['batched_pairs_per_s']:9.0f} {r['batched_over_sync']:6.2f} {r['mean_batch']:5.1f} "
                   f"{r['inference_share']:5.2f} {r['max_abs_diff']:8.4f} {r['max_logit_diff']:6.3f} "
                   f"{r['argmax_agreement']:7.3f} {r['decision_agreement']:8.3f}")
    if json_out:
        json_out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    typer.run(main)
