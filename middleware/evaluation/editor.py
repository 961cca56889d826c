"""Evaluate an editor over JSON lines: {"text", "evidence"?, "context"?} and, for dev sets
with known fixes, {"original", "type"} (``tests/data/edit_dev.jsonl``, ``make-edit-data``
output). Each line is revised with no search; Attr_auto is measured before and after."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from middleware.pipeline.verifiers.base import Verifier, passages_from_texts
from middleware.pipeline.editing import Editor
from middleware.evaluation.edit_metrics import EditReport, EditScore, attribution, preservation
from middleware.revise.runner import revise
from middleware.training.editor_data import row_fields


async def evaluate(rows: Iterable[Mapping[str, Any]], verifier: Verifier, editor: Editor) -> EditReport:
    report = EditReport()
    for row in rows:
        text, evidence_texts, context = row_fields(row)
        evidence = passages_from_texts(evidence_texts)
        started = time.perf_counter()
        revision = await revise(text, evidence, verifier, editor, context)
        report.revise_ms.append((time.perf_counter() - started) * 1000)
        before = await attribution(verifier, text, evidence, context)
        after = before if revision.text == text else await attribution(verifier, revision.text, evidence, context)
        report.add(
            EditScore(
                original=text, edited=revision.text, attr_before=before, attr_after=after,
                preservation=preservation(text, revision.text), target=row.get("original"), type=row.get("type"),
            )  # fmt: skip
        )
    return report
