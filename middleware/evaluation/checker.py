"""Detection quality of the whole pipeline on a labelled dev set (``factcheck eval-check``).

Dev rows: ``{"id", "text", "context", "type", "label", "wrong", "right", "doc"}`` with type
one of supported, entity, number, date, relation, invented, subjective, unverifiable.
Gold FAVA types per sentence: entity/number/date errors are FAVA ``entity`` errors,
relation → ``relation``, invented → ``invented``, subjective → ``subjective``,
unverifiable → ``unverifiable``, supported → none. Predicted types: the report's tags
(a whole-sentence ``contradictory`` tag counts for entity/relation rows, as FAVA scores
it as a detection of a different type). Scored per sentence and per type (FAVA), plus
binary any-error F1, verdict-label accuracy and, for error rows, whether the suggested
replacement equals the gold ``right`` value.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from middleware.checking import check_sentence
from middleware.interfaces import Checker
from middleware.types import CheckContext, Mode, Sentence, SentenceReport

FAVA_OF_DEV_TYPE = {
    "supported": set(), "entity": {"entity"}, "number": {"entity"}, "date": {"entity"},
    "relation": {"relation"}, "invented": {"invented"}, "subjective": {"subjective"},
    "unverifiable": {"unverifiable"},
}  # fmt: skip
ERROR_TYPES = ("entity", "relation", "contradictory", "invented", "subjective", "unverifiable")


@dataclass
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass
class QualityReport:
    per_type: dict[str, Counts] = field(default_factory=dict)
    binary: Counts = field(default_factory=Counts)
    label_correct: int = 0
    rows: int = 0
    fixes_right: int = 0
    fixes_possible: int = 0
    per_dev_type_detected: dict[str, list[int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        scored = [t for t, c in self.per_type.items() if c.tp + c.fn > 0]
        return {
            "rows": self.rows,
            "label_accuracy": self.label_correct / self.rows if self.rows else 0.0,
            "per_type": {t: {"precision": c.precision, "recall": c.recall, "f1": c.f1, "support": c.tp + c.fn}
                         for t, c in self.per_type.items()},
            "macro_f1": sum(self.per_type[t].f1 for t in scored) / len(scored) if scored else 0.0,
            "binary_f1": self.binary.f1,
            "fix_accuracy": self.fixes_right / self.fixes_possible if self.fixes_possible else 0.0,
            "detected_by_dev_type": {t: sum(v) / len(v) for t, v in self.per_dev_type_detected.items()},
        }


def predicted_types(report: SentenceReport, dev_type: str) -> set[str]:
    types = {t.type for t in report.tags}
    if "contradictory" in types and dev_type in ("entity", "number", "date", "relation"):
        types = (types - {"contradictory"}) | FAVA_OF_DEV_TYPE[dev_type]
    return types


def score(rows: Sequence[dict[str, Any]], reports: Sequence[SentenceReport]) -> QualityReport:
    out = QualityReport(per_type={t: Counts() for t in ERROR_TYPES})
    for row, report in zip(rows, reports, strict=True):
        gold = FAVA_OF_DEV_TYPE[row["type"]]
        pred = predicted_types(report, row["type"])
        for t in ERROR_TYPES:
            counts = out.per_type[t]
            counts.tp += t in gold and t in pred
            counts.fp += t not in gold and t in pred
            counts.fn += t in gold and t not in pred
        out.binary.tp += bool(gold) and bool(pred)
        out.binary.fp += not gold and bool(pred)
        out.binary.fn += bool(gold) and not pred
        out.rows += 1
        out.label_correct += report.verdict.label == row["label"]
        out.per_dev_type_detected.setdefault(row["type"], []).append(int(bool(gold & pred) or (not gold and not pred)))
        if row.get("right") and row["type"] in ("entity", "number", "date"):
            out.fixes_possible += 1
            out.fixes_right += any((t.replacement or "").strip() == row["right"].strip() for t in report.tags)
    return out


async def check_rows(checker: Checker, rows: Sequence[dict[str, Any]], concurrency: int = 4) -> list[SentenceReport]:
    """Check each dev sentence on its own, with its context as the previous sentence."""
    gate = asyncio.Semaphore(concurrency)

    async def one(row: dict[str, Any]) -> SentenceReport:
        text = row["text"]
        context = CheckContext(previous=[row["context"]] if row.get("context") else [], mode=Mode.ANNOTATE)
        async with gate:
            return await check_sentence(checker, Sentence(index=0, start=0, end=len(text), text=text), context)

    return list(await asyncio.gather(*(one(r) for r in rows)))
