"""Evaluation of a verifier: 3-way dev accuracy, attributable-vs-not balanced accuracy on
claim/evidence sets (WiCE, FEVER-Symmetric), and CPU latency of an exported model.

The exported model runs through the project runtime (manifest, tokenizer, onnxruntime
session); no torch import here.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from middleware.training import LABELS
from middleware.training.data import NOT_ENTAILMENT, Pair

ENTAILMENT = LABELS.index("entailment")


def dev_metrics(pairs: Sequence[Pair], probs: np.ndarray) -> dict[str, float]:
    """3-way accuracy on three-class pairs (natural sources, all, per source) and
    entailment-vs-rest accuracy on two-class sources."""
    pred = probs.argmax(axis=1)
    groups: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        groups.setdefault(pair.source, []).append(i)
    out = {
        "acc3_natural": _accuracy(
            pred, pairs, [i for i, p in enumerate(pairs) if p.label >= 0 and p.source != "synthetic"]
        ),
        "acc3_all": _accuracy(pred, pairs, [i for i, p in enumerate(pairs) if p.label >= 0]),
    }
    for source, index in sorted(groups.items()):
        if any(pairs[i].label == NOT_ENTAILMENT for i in index):
            hits = [(pred[i] == ENTAILMENT) == (pairs[i].label == ENTAILMENT) for i in index]
            out[f"acc2_{source}"] = float(np.mean(hits))
        else:
            out[f"acc3_{source}"] = _accuracy(pred, pairs, index)
    return out


def _accuracy(pred: np.ndarray, pairs: Sequence[Pair], index: Sequence[int]) -> float:
    return float(np.mean([pred[i] == pairs[i].label for i in index])) if index else float("nan")


def balanced_accuracy(gold: Sequence[bool], predicted: Sequence[bool]) -> float:
    """Mean of the recalls of the positive and the negative class."""
    gold_a, pred_a = np.asarray(gold, bool), np.asarray(predicted, bool)
    recalls = [float(np.mean(pred_a[gold_a == value] == value)) for value in (True, False) if (gold_a == value).any()]
    return float(np.mean(recalls))


class OnnxNli:
    """An exported NLI model through the runtime's pair scorer, scored synchronously;
    ``probs`` returns probabilities in ``LABELS`` order whatever the export's column order."""

    def __init__(self, directory: Path, threads: int = 2) -> None:
        from middleware.runtime.loading import load_pair_scorer
        from middleware.settings import RuntimeSettings

        settings = RuntimeSettings(provider="cpu", intra_op_threads=threads)
        self.scorer = load_pair_scorer(str(directory), "nli", settings)
        self.manifest = self.scorer.manifest
        self.columns = [self.scorer.labels.index(name) for name in LABELS]

    def probs(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
        return self.scorer.score_sync(list(pairs), batch_size)[:, self.columns]


def evaluate_dev(model: OnnxNli, pairs: Sequence[Pair]) -> dict[str, float]:
    probs = model.probs([(p.premise, p.hypothesis) for p in pairs])
    return {k: round(v, 4) for k, v in dev_metrics(pairs, probs).items()} | {"pairs": len(pairs)}


def evaluate_fever_symmetric(model: OnnxNli, path: Path, threshold: float = 0.5) -> dict[str, float]:
    """Claim vs its one evidence sentence; attributable when P(entailment) >= threshold."""
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    from middleware.training.data import clean_text

    probs = model.probs([(clean_text(r["evidence"]), clean_text(r["claim"])) for r in rows])
    gold = [r["label"] == "SUPPORTS" for r in rows]
    return {
        "balanced_accuracy": round(balanced_accuracy(gold, probs[:, ENTAILMENT] >= threshold), 4),
        "records": len(rows),
        "threshold": threshold,
    }


def sentence_windows(sentences: Sequence[str], size: int = 3, stride: int = 2) -> list[str]:
    """Overlapping windows of ``size`` sentences (every sentence lies in some window)."""
    if len(sentences) <= size:
        return [" ".join(sentences)] if sentences else []
    starts = list(range(0, len(sentences) - size + 1, stride))
    if starts[-1] + size < len(sentences):
        starts.append(len(sentences) - size)
    return [" ".join(sentences[s : s + size]) for s in starts]


def evaluate_wice(model: OnnxNli, path: Path, threshold: float = 0.5, size: int = 3, stride: int = 2) -> dict:
    """Claim vs its cited page as sentence windows; the highest P(entailment) over windows
    decides. Gold attributable = ``supported`` (partially/not supported are not)."""
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    pairs: list[tuple[str, str]] = []
    owner: list[int] = []
    for n, row in enumerate(rows):
        for window in sentence_windows([s for s in row["evidence"] if s.strip()], size, stride):
            pairs.append((window, row["claim"]))
            owner.append(n)
    probs = model.probs(pairs)[:, ENTAILMENT]
    best = np.zeros(len(rows))
    np.maximum.at(best, np.asarray(owner), probs)
    gold = [r["label"] == "supported" for r in rows]
    return {
        "balanced_accuracy": round(balanced_accuracy(gold, best >= threshold), 4),
        "records": len(rows),
        "windows": len(pairs),
        "threshold": threshold,
        "window_sentences": size,
        "stride": stride,
    }


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
