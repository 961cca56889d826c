"""Scoring of the planted-error benchmark: a pure function of the data rows and the checker's
results, so the arithmetic is tested without any model.

Detection: for the planted kinds number/date/entity/ordinal/role_swap/relation a row is
detected when the verdict is ``contradictory``; for ``addition`` (an unsupported invented
detail) when the verdict is not ``attributable``. True rows give the false-alarm rate (share
judged ``contradictory``) and the share flagged (not ``attributable``).

Precision per kind is the precision on a balanced set of that kind and true rows:
``recall / (recall + false-alarm rate under the same criterion)``. The overall precision is
the plain one: detected planted rows over all rows that raised the alarm (contradictory).

A wrong edit is any edit whose result is not the row's expected fix: every edit of a row
without an expected fix (role_swap, relation, addition, true) and every edit of a
number/date/entity/ordinal row that does not produce the expected sentence.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

CONTRADICTION_KINDS = ("number", "date", "entity", "ordinal", "role_swap", "relation")
FIX_KINDS = ("number", "date", "entity", "ordinal")
KINDS = (*CONTRADICTION_KINDS, "addition", "true")
EXPECTED_VERDICT = {**{k: "contradictory" for k in CONTRADICTION_KINDS},
                    "addition": "extrapolatory", "true": "attributable"}


@dataclass(frozen=True)
class Result:
    """What the checker did with one row's sentence (correct mode)."""

    id: str
    verdict: str
    edited: str | None = None
    evidence_sentence: str | None = None
    latency_s: float = 0.0
    reason: str | None = None


def normalise(text: str | None) -> str:
    return " ".join((text or "").split())


def was_edited(row: dict[str, Any], result: Result) -> bool:
    return result.edited is not None and normalise(result.edited) != normalise(row["sentence"])


def is_wrong_edit(row: dict[str, Any], result: Result) -> bool:
    if not was_edited(row, result):
        return False
    return row.get("expected_fix") is None or normalise(result.edited) != normalise(row["expected_fix"])


def is_exact_fix(row: dict[str, Any], result: Result) -> bool:
    return row.get("expected_fix") is not None and was_edited(row, result) and not is_wrong_edit(row, result)


def alarm(kind: str, verdict: str) -> bool:
    """Whether the verdict counts as detecting a row of ``kind``'s error."""
    return verdict != "attributable" if kind == "addition" else verdict == "contradictory"


def _rate(hits: int, n: int) -> float | None:
    return hits / n if n else None


def _true_rates(pairs: Sequence[tuple[dict[str, Any], Result]]) -> dict[str, float | None]:
    n = len(pairs)
    return {
        "false_alarm_rate": _rate(sum(r.verdict == "contradictory" for _, r in pairs), n),
        "flagged_rate": _rate(sum(r.verdict != "attributable" for _, r in pairs), n),
    }


def _precision(recall: float | None, false_alarm: float | None) -> float | None:
    if recall is None or false_alarm is None:
        return None
    return recall / (recall + false_alarm) if recall + false_alarm else None


def _kind_metrics(kind: str, pairs: Sequence[tuple[dict[str, Any], Result]],
                  true_rates: dict[str, float | None]) -> dict[str, Any]:
    n = len(pairs)
    fixable = [(row, res) for row, res in pairs if row.get("expected_fix") is not None]
    out: dict[str, Any] = {
        "n": n,
        "verdict_accuracy": _rate(sum(res.verdict == EXPECTED_VERDICT[kind] for _, res in pairs), n),
        "edits": sum(was_edited(row, res) for row, res in pairs),
        "wrong_edits": sum(is_wrong_edit(row, res) for row, res in pairs),
        "wrong_edit_rate": _rate(sum(is_wrong_edit(row, res) for row, res in pairs), n),
        "exact_fix_rate": _rate(sum(is_exact_fix(row, res) for row, res in fixable), len(fixable)),
    }
    if kind == "true":
        return {**out, **true_rates}
    recall = _rate(sum(alarm(kind, res.verdict) for _, res in pairs), n)
    reference = true_rates["flagged_rate" if kind == "addition" else "false_alarm_rate"]
    return {**out, "recall": recall, "precision": _precision(recall, reference)}


def _overall(pairs: Sequence[tuple[dict[str, Any], Result]]) -> dict[str, Any]:
    planted = [(row, res) for row, res in pairs if row["kind"] != "true"]
    fixable = [(row, res) for row, res in pairs if row.get("expected_fix") is not None]
    tp = sum(alarm(row["kind"], res.verdict) for row, res in planted)
    fp = sum(res.verdict == "contradictory" for row, res in pairs if row["kind"] == "true")
    latencies = [res.latency_s for _, res in pairs]
    return {
        "n": len(pairs),
        "precision": _rate(tp, tp + fp),
        "recall": _rate(tp, len(planted)),
        "exact_fix_rate": _rate(sum(is_exact_fix(row, res) for row, res in fixable), len(fixable)),
        "edits": sum(was_edited(row, res) for row, res in pairs),
        "wrong_edits": sum(is_wrong_edit(row, res) for row, res in pairs),
        "wrong_edit_rate": _rate(sum(is_wrong_edit(row, res) for row, res in pairs), len(pairs)),
        "median_latency_ms": 1000 * statistics.median(latencies) if latencies else None,
        "p95_latency_ms": 1000 * _percentile(latencies, 0.95) if latencies else None,
    }


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def wrong_edits(rows: Sequence[dict[str, Any]], results: Sequence[Result]) -> list[dict[str, Any]]:
    """Each wrong edit with what engineers need to debug it."""
    return [
        {"id": row["id"], "kind": row["kind"], "original": row["sentence"], "edited": res.edited,
         "expected_fix": row.get("expected_fix"), "evidence_used": res.evidence_sentence,
         "gold_evidence": row["evidence"]}
        for row, res in zip(rows, results, strict=True) if is_wrong_edit(row, res)
    ]


def score(rows: Sequence[dict[str, Any]], results: Sequence[Result]) -> dict[str, Any]:
    """Per-kind and overall figures, and the list of wrong edits."""
    if len(rows) != len(results) or any(row["id"] != res.id for row, res in zip(rows, results)):
        raise ValueError("results must be given in the order of the rows, one per row")
    pairs = list(zip(rows, results))
    by_kind = {k: [(row, res) for row, res in pairs if row["kind"] == k] for k in KINDS}
    true_rates = _true_rates(by_kind["true"])
    per_kind = {k: _kind_metrics(k, p, true_rates) for k, p in by_kind.items() if p}
    return {"per_kind": per_kind, "overall": _overall(pairs), "wrong_edits": wrong_edits(rows, results),
            "results": [asdict(res) for res in results]}
