"""Choosing where the learned decision says attributable for claims checked against evidence
that holds structured records (``factcheck fit-record-threshold``).

The combiner's cut-off was chosen on the battery's pairs: prose claims beside prose snippets.
A record (JSON, or a Python literal, read as ``label: value`` lines) is read poorly by the NLI
model, and an answer's overview of a business draws on its fields and on several reviews at
once, which no single window entails: P(attributable) sits lower there on sentences people
judged supported. That cut-off is chosen end to end: answers of the ``train`` splits streamed
through the proxy (``factcheck eval-battery --e2e --split train --e2e-dump F``, run at the
combiner's own cut-off; each row says whether its answer's documents hold records) are
relabelled at each candidate, only where the documents hold records, and the candidate with
the best mean flagged balanced accuracy over the sets (each set counts once) wins. Only
cut-offs at or below the combiner's are candidates: a dump made at that cut-off holds every
claim's P(attributable), and lowering it only turns extrapolatory claims above the new
cut-off attributable, which the dump decides exactly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from middleware.training.claim_sets import read_jsonl
from middleware.training.metrics import balanced_accuracy

STEP = 0.01


def read_dump(path: Path) -> list[dict[str, Any]]:
    """The annotate-mode rows of an ``--e2e-dump`` file: one gold sentence each."""
    rows = [r for r in read_jsonl(path) if r.get("mode", "annotate") == "annotate"]
    if any("records" not in r for r in rows):
        raise ValueError(f"{path}: rows without 'records': dump it again with this version (--e2e-dump)")
    return rows


def check_made_at(rows: Iterable[Mapping[str, Any]], cut: float) -> None:
    """Refuse rows from a run at another cut-off: at ``cut`` no extrapolatory claim of a
    record-holding answer reaches it."""
    for row in rows:
        if not row["records"]:
            continue
        for label, p in zip(row["labels"], row["p_attributable"], strict=True):
            if label == "extrapolatory" and p is not None and p >= cut:
                raise ValueError(
                    f"{row['dataset']} {row['answer']}: an extrapolatory claim at P(attributable)={p:.3f} >= {cut}: "
                    "the dump was not made at the combiner's own cut-off (run it with "
                    f"FACTCHECK_PIPELINE__RULES__RECORD_THRESHOLD={cut})"
                )


def flagged_at(row: Mapping[str, Any], cut: float) -> bool:
    """Whether the row's sentence is flagged when, against records, extrapolatory claims at
    or above ``cut`` count as attributable (contradictions and every other label stand)."""
    for label, p in zip(row["labels"], row["p_attributable"], strict=True):
        if label == "contradictory":
            return True
        if label == "extrapolatory" and (not row["records"] or p is None or p < cut):
            return True
    return False


def balanced_accuracy_at(rows: Sequence[Mapping[str, Any]], cut: float) -> float:
    """Flagged balanced accuracy of ``rows`` at ``cut``: a sentence with any gold span should be flagged."""
    gold = [row["gold"] != "attributable" for row in rows]
    return balanced_accuracy(gold, [flagged_at(row, cut) for row in rows])


def choose(rows: Sequence[Mapping[str, Any]], ceiling: float, floor: float = 0.2) -> tuple[float, dict[str, Any]]:
    """The cut-off in [floor, ceiling] (steps of ``STEP`` down from ``ceiling``) with the best
    mean balanced accuracy over the rows' sets, the highest on a tie; and every candidate's
    figures per set."""
    by_set: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_set[row["dataset"]].append(row)
    if not any(row["records"] for row in rows):
        raise ValueError("no answer of the dumps brings records: nothing to choose from")
    table: dict[str, Any] = {}
    best, best_mean = ceiling, -1.0
    for i in range(int(round((ceiling - floor) / STEP)) + 1):
        cut = round(ceiling - i * STEP, 4)
        figures = {name: round(100 * balanced_accuracy_at(set_rows, cut), 2) for name, set_rows in sorted(by_set.items())}
        mean = sum(figures.values()) / len(figures)
        table[f"{cut:.4f}"] = figures | {"mean": round(mean, 2)}
        if mean > best_mean + 1e-9:
            best, best_mean = cut, mean
    return best, table
