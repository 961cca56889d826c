"""The planted-error benchmark (issue 19): every row of ``planted.jsonl`` is one answer
sentence, checked by the offline default pipeline (the one ``factcheck check`` builds, on the
demo index) in correct mode; prints per-kind detection, exact-fix and wrong-edit figures and
the wrong edits themselves.

    python -m load_tests.quality.planted [--data FILE] [--json OUT] [--mode correct] [--limit N]
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from load_tests.quality.data import load_rows
from middleware.evaluation.planted import KINDS, Result, score
from middleware.checking import CheckRunner
from middleware.composition import command_line_runner
from middleware.settings import load_settings
from middleware.types import CheckContext, Mode, Sentence, SentenceReport

DATA = Path(__file__).with_name("planted.jsonl")


def edited_text(sentence: str, report: SentenceReport) -> str | None:
    """The sentence after the report's edits (applied in correct mode, suggested otherwise)."""
    if report.corrected_text is not None:
        return report.corrected_text
    if not report.edits:
        return None
    text = sentence
    for edit in sorted(report.edits, key=lambda e: e.start, reverse=True):
        text = text[: edit.start] + edit.replacement + text[edit.end :]
    return text


def to_result(row: dict[str, Any], report: SentenceReport, seconds: float) -> Result:
    named = next((e.evidence for e in report.edits if e.evidence), None)
    return Result(id=row["id"], verdict=report.verdict.label, edited=edited_text(row["sentence"], report),
                  evidence_sentence=named or report.verdict.evidence_sentence, latency_s=seconds,
                  reason=_reason(report))


def _reason(report: SentenceReport) -> str | None:
    """The verdict's reason, and in correct mode the edit decision's."""
    if report.revision is None:
        return report.verdict.reason
    rule = f" by {report.revision.rule}" if report.revision.rule else ""
    return f"{report.verdict.reason} | edit {report.revision.status}{rule}: {report.revision.reason}"


async def check_row(runner: CheckRunner, row: dict[str, Any], mode: Mode) -> Result:
    """One sentence on its own; the row's context, if any, as the answer's earlier text."""
    text = row["sentence"]
    previous = [row["context"]] if row.get("context") else []
    started = time.perf_counter()
    session = runner.session(CheckContext(mode=mode))
    try:
        report = await session.submit(Sentence(index=0, start=0, end=len(text), text=text), previous)
    finally:
        session.close()
    return to_result(row, report, time.perf_counter() - started)


async def check_all(runner: CheckRunner, rows: list[dict[str, Any]], mode: Mode) -> list[Result]:
    """One sentence at a time, so the latencies are those of a lone stream."""
    if rows:
        await check_row(runner, rows[0], mode)  # warm-up: sessions, spaCy, caches
    return [await check_row(runner, row, mode) for row in rows]


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def table(metrics: dict[str, Any]) -> str:
    """The per-kind table in Markdown."""
    lines = ["| kind | n | precision | recall | false alarm | flagged | exact fix | edits | wrong edits "
             "| wrong-edit rate |", "|---|---|---|---|---|---|---|---|---|---|"]
    rows = [(k, metrics["per_kind"][k]) for k in KINDS if k in metrics["per_kind"]]
    for kind, m in [*rows, ("overall", metrics["overall"])]:
        lines.append(f"| {kind} | {m['n']} | {_fmt(m.get('precision'))} | {_fmt(m.get('recall'))} | "
                     f"{_fmt(m.get('false_alarm_rate'))} | {_fmt(m.get('flagged_rate'))} | "
                     f"{_fmt(m.get('exact_fix_rate'))} | {m['edits']} | {m['wrong_edits']} | "
                     f"{_fmt(m['wrong_edit_rate'])} |")
    return "\n".join(lines)


def print_report(metrics: dict[str, Any]) -> None:
    overall = metrics["overall"]
    print(table(metrics))
    print(f"\nmedian latency per sentence {overall['median_latency_ms']:.0f} ms, "
          f"p95 {overall['p95_latency_ms']:.0f} ms")
    print(f"\nwrong edits: {len(metrics['wrong_edits'])}")
    for wrong in metrics["wrong_edits"]:
        print(f"- {wrong['id']} ({wrong['kind']}): {wrong['original']!r}\n    -> {wrong['edited']!r}"
              f"\n    expected: {wrong['expected_fix']!r}\n    evidence named: {wrong['evidence_used']!r}")


def main(
    data: Annotated[Path, typer.Option(help="benchmark rows (JSON lines)")] = DATA,
    json_out: Annotated[Path | None, typer.Option("--json", help="write all figures and results here")] = None,
    mode: Annotated[Mode, typer.Option(help="correct (apply edits) or annotate (suggest them)")] = Mode.CORRECT,
    limit: Annotated[int | None, typer.Option(help="only the first N rows")] = None,
) -> None:
    """Check every planted-error and true sentence; print the per-kind figures."""
    logging.basicConfig(level="WARNING")
    rows = load_rows(data, limit)
    runner = command_line_runner(load_settings())  # what `factcheck check` runs
    results = asyncio.run(check_all(runner, rows, mode))
    metrics = {"data": str(data), "mode": mode.value, **score(rows, results)}
    print_report(metrics)
    if json_out:
        json_out.write_text(json.dumps(metrics, ensure_ascii=False, indent=2), encoding="utf-8")


if __name__ == "__main__":
    typer.run(main)
