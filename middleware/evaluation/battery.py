"""The third-party battery: the yardstick of verdicts (``factcheck eval-battery``).

Sentences of LLM answers and summaries judged by people against the documents they came
from (``dev-battery/``: ExpertQA, LFQA-Verification, SummEdits, each row marked ``train`` or
``test`` with whole questions or documents on one side) plus FEVER-Symmetric and WiCE dev.
Every set is scored the same way, on a fixed seeded sample: balanced accuracy of attributable
vs not (what the product acts on: support or flag), ROC AUC of P(attributable), contradiction
precision where gold has contradictions, and the word-overlap baseline beside it. The
project tunes nothing on the ``test`` rows; FEVER-Symmetric and WiCE are never tuned on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from middleware.pipeline.verifiers.features import OVERLAP_CUT, word_overlap
from middleware.training.claim_sets import BATTERY_SETS, Item
from middleware.training.metrics import balanced_accuracy, roc_auc

if TYPE_CHECKING:
    from middleware.pipeline.verifiers import HybridVerifier, Verifier


@dataclass
class Scored:
    """A verifier's verdicts on one set, item by item."""

    dataset: str
    items: list[Item]
    labels: list[str] = field(default_factory=list)
    p_attributable: list[float] = field(default_factory=list)
    rules: list[list[str]] = field(default_factory=list)
    seconds: float = 0.0

    def metrics(self) -> dict[str, Any]:
        gold = [i.gold == "attributable" for i in self.items]
        overlap = [word_overlap(i.claim, i.evidence) for i in self.items]
        out: dict[str, Any] = {
            "n": len(self.items),
            "balanced_accuracy": round(100 * balanced_accuracy(gold, [x == "attributable" for x in self.labels]), 1),
            "auc": round(100 * roc_auc(gold, self.p_attributable), 1),
            "overlap_balanced_accuracy": round(100 * balanced_accuracy(gold, [o >= OVERLAP_CUT for o in overlap]), 1),
            "overlap_auc": round(100 * roc_auc(gold, overlap), 1),
            "seconds_per_item": round(self.seconds / max(1, len(self.items)), 3),
        }
        if any(i.gold == "contradictory" for i in self.items):
            flagged = [i.gold == "contradictory" for i, x in zip(self.items, self.labels, strict=True) if x == "contradictory"]
            out["contradiction_precision"] = round(100 * float(np.mean(flagged)), 1) if flagged else None
            out["contradiction_recall"] = round(100 * sum(flagged) / sum(i.gold == "contradictory" for i in self.items), 1)
            out["contradictions_flagged"] = len(flagged)
        return out


async def score(verifier: Verifier, dataset: str, items: Sequence[Item], concurrency: int = 4) -> Scored:
    """Verify every item through the product's ``Verifier`` interface (evidence windowed as
    in serving); the claim as written, the question as context."""
    from middleware.pipeline.verifiers import passages_from_texts

    semaphore = asyncio.Semaphore(concurrency)

    async def one(item: Item) -> tuple[str, float, list[str]]:
        async with semaphore:
            verdict = await verifier.verify(item.claim, passages_from_texts(item.evidence), item.context)
            return verdict.label, float(verdict.scores.get("attributable", 0.0)), [r.name for r in verdict.rules]

    started = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in items))
    scored = Scored(dataset, list(items), seconds=time.perf_counter() - started)
    for label, p, rules in results:
        scored.labels.append(label)
        scored.p_attributable.append(p)
        scored.rules.append(rules)
    return scored


def mean_row(rows: dict[str, dict[str, Any]], sets: Sequence[str]) -> dict[str, Any]:
    """The unweighted mean over ``sets`` of each metric every one of them has."""
    present = [rows[s] for s in sets if s in rows]
    keys = ("balanced_accuracy", "auc", "overlap_balanced_accuracy", "overlap_auc")
    return {k: round(float(np.mean([r[k] for r in present])), 1) for k in keys} | {"sets": len(present)}


def render_table(rows: dict[str, dict[str, Any]]) -> str:
    """A plain-text table of the per-set rows, the battery mean and the mean of all sets."""
    head = f"{'set':<20}{'n':>5}{'bal.acc':>9}{'overlap':>9}{'AUC':>7}{'ov.AUC':>8}{'contr.P':>9}{'s/item':>8}"
    lines = [head, "-" * len(head)]
    for name, r in rows.items():
        contra = r.get("contradiction_precision")
        seconds = f"{r['seconds_per_item']:.3f}" if "seconds_per_item" in r else ""
        lines.append(
            f"{name:<20}{r.get('n', ''):>5}{r['balanced_accuracy']:>9.1f}{r['overlap_balanced_accuracy']:>9.1f}"
            f"{r['auc']:>7.1f}{r['overlap_auc']:>8.1f}{(f'{contra:.1f}' if contra is not None else '-'):>9}"
            f"{seconds:>8}"
        )
    return "\n".join(lines)


def regressions(result: dict[str, Any], baseline: dict[str, Any], tolerance: float = 1.0) -> list[str]:
    """Where ``result`` (an ``eval-battery`` JSON) falls more than ``tolerance`` points of
    balanced accuracy below ``baseline``: the battery mean and every set both have."""
    out = []
    pairs = [("battery mean", result["battery_mean"], baseline["battery_mean"])] + [
        (name, row, baseline["sets"][name]) for name, row in result["sets"].items() if name in baseline["sets"]
    ]
    for name, now, before in pairs:
        if now["balanced_accuracy"] < before["balanced_accuracy"] - tolerance:
            out.append(f"{name}: balanced accuracy {now['balanced_accuracy']} < baseline {before['balanced_accuracy']} - {tolerance}")
    return out


def _balanced_accuracies(gold: np.ndarray, predicted: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Balanced accuracy of each row of ``index`` (resampled item indices) at once."""
    g, p = gold[index], predicted[index]
    recalls = []
    for value in (True, False):
        members = g == value
        count = members.sum(axis=1)
        hits = (members & (p == value)).sum(axis=1)
        recalls.append(np.where(count > 0, hits / np.maximum(count, 1), np.nan))
    return np.nanmean(np.stack(recalls), axis=0)


def paired_bootstrap(
    base: dict[str, Scored], other: dict[str, Scored], resamples: int = 1000, seed: int = 0
) -> tuple[float, float, float]:
    """The change of the mean balanced accuracy (points) from ``base`` to ``other`` over the
    same items, with its 95% interval: items resampled within each set, both verdicts of an
    item kept together."""
    rng = np.random.default_rng(seed)
    diffs = np.zeros(resamples)
    for name, scored in base.items():
        gold = np.asarray([i.gold == "attributable" for i in scored.items])
        a = np.asarray([x == "attributable" for x in scored.labels])
        b = np.asarray([x == "attributable" for x in other[name].labels])
        index = rng.integers(0, len(gold), size=(resamples, len(gold)))
        diffs += _balanced_accuracies(gold, b, index) - _balanced_accuracies(gold, a, index)
    diffs *= 100 / len(base)
    point = float(np.mean([
        balanced_accuracy([i.gold == "attributable" for i in s.items], [x == "attributable" for x in other[n].labels])
        - balanced_accuracy([i.gold == "attributable" for i in s.items], [x == "attributable" for x in s.labels])
        for n, s in base.items()
    ])) * 100  # fmt: skip
    low, high = np.percentile(diffs, [2.5, 97.5])
    return round(point, 2), round(float(low), 2), round(float(high), 2)


async def score_sets(
    verifier: Verifier, samples: dict[str, list[Item]], log: Callable[[str], None] | None = None
) -> dict[str, Scored]:
    out = {}
    for name, items in samples.items():
        out[name] = await score(verifier, name, items)
        if log is not None:
            log(f"{name}: {out[name].metrics()}")
    return out


def _hold_caches(verifier: HybridVerifier, items: int) -> None:
    """Ablation runs score the same pairs again: keep every NLI score and parse of the run."""
    from middleware.pipeline import slots

    verifier.nli.cache_size = max(verifier.nli.cache_size, 64 * items)
    slots.set_cache_size(max(slots.cache_size(), 16 * items))


async def ablate(
    verifier: Verifier, samples: dict[str, list[Item]], base: dict[str, Scored],
    log: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Each rule of the slots verifier switched off alone, and the hand cut-offs in place of
    the learned decision: the change of each set's balanced accuracy, of the battery mean
    (with its paired bootstrap interval, where battery sets are scored) and of contradiction
    precision and recall where gold has contradictions (FEVER-Symmetric), against ``base``."""
    from middleware.pipeline.verifiers import HybridVerifier
    from middleware.pipeline.verifiers.slots_verifier import RULES

    if not isinstance(verifier, HybridVerifier):
        raise ValueError("--ablate needs the hybrid verifier (its rules and its decision)")
    _hold_caches(verifier, sum(len(v) for v in samples.values()))
    disabled, combiner = verifier.slots.disabled, verifier.combiner
    variants: dict[str, Callable[[], None]] = {
        rule: (lambda rule=rule: setattr(verifier.slots, "disabled", disabled | {rule}))
        for rule in RULES
        if rule not in disabled
    }

    def hand_cut_offs() -> None:  # as configured with pipeline.rules.decision: hand (every rule on)
        verifier.combiner, verifier.slots.disabled = None, frozenset()

    if combiner is not None:
        variants["learned_decision"] = hand_cut_offs
    before = {k: base[k].metrics() for k in samples}
    battery_sets = {k: base[k] for k in samples if k in BATTERY_SETS}
    contradicted = [k for k in samples if "contradiction_recall" in before[k]]
    out: dict[str, dict[str, Any]] = {}
    for name, switch_off in variants.items():
        switch_off()
        try:
            other = await score_sets(verifier, samples)
        finally:
            verifier.slots.disabled, verifier.combiner = disabled, combiner
        after = {k: other[k].metrics() for k in samples}
        point, low, high = paired_bootstrap(battery_sets, other) if battery_sets else (0.0, 0.0, 0.0)
        out[name] = {
            "battery_mean_change": point, "interval": [low, high],
            "fired": sum(1 for s in base.values() for r in s.rules if name in r),
            "sets": {k: round(after[k]["balanced_accuracy"] - before[k]["balanced_accuracy"], 1) for k in samples},
            "contradictions": {
                k: {m: [before[k].get(m), after[k].get(m)] for m in ("contradiction_precision", "contradiction_recall")}
                for k in contradicted
            },
        }  # fmt: skip
        if log is not None:
            log(f"without {name}: {out[name]}")
    return out


def render_ablation(rows: dict[str, dict[str, Any]]) -> str:
    """One line per rule: the battery mean's change when it is off, its interval, per set."""
    sets = list(next(iter(rows.values()))["sets"]) if rows else []
    head = f"{'without':<22}{'fired':>6}{'mean chg':>10}{'95% interval':>17}" + "".join(f"{s[:10]:>11}" for s in sets)
    lines = [head, "-" * len(head)]
    for name, r in rows.items():
        low, high = r["interval"]
        lines.append(
            f"{name:<22}{r['fired']:>6}{r['battery_mean_change']:>10.2f}{f'[{low:.2f}, {high:.2f}]':>17}"
            + "".join(f"{r['sets'][s]:>11.1f}" for s in sets)
            + "".join(
                f"   {k} contradiction P {c['contradiction_precision'][0]} -> {c['contradiction_precision'][1]}, "
                f"R {c['contradiction_recall'][0]} -> {c['contradiction_recall'][1]}"
                for k, c in r.get("contradictions", {}).items()
            )
        )
    return "\n".join(lines)
