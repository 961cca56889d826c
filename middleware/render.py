"""Terminal rendering of checked text (rich): sentences coloured by verdict, FAVA tags and
suggested corrections inline, then a table of the reports. Used by ``factcheck demo`` and
``factcheck check``."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from middleware.types import SentenceReport, StreamSummary

VERDICT_STYLE = {
    "attributable": "green",
    "contradictory": "bold red",
    "extrapolatory": "yellow",
    "skipped": "dim",
    "unverified": "magenta",
}


def annotated_text(message: str, reports: Sequence[SentenceReport]) -> Text:
    """The message with each checked sentence coloured by verdict and each suggested edit
    shown as ``[-wrong-]{+right+}``."""
    text = Text()
    cursor = 0
    for report in sorted(reports, key=lambda r: r.start):
        text.append(message[cursor : report.start])
        style = VERDICT_STYLE.get(report.verdict.label, "")
        sentence_cursor = report.start
        for edit in sorted(report.edits, key=lambda e: e.start):
            if edit.start < sentence_cursor or edit.end > report.end:
                continue
            text.append(message[sentence_cursor : edit.start], style=style)
            text.append(f"[-{edit.original}-]", style="red strike")
            text.append(f"{{+{edit.replacement}+}}", style="bold green")
            sentence_cursor = edit.end
        text.append(message[sentence_cursor : report.end], style=style)
        cursor = report.end
    text.append(message[cursor:])
    return text


def reports_table(reports: Sequence[SentenceReport]) -> Table:
    table = Table(title="Fact-check reports", show_lines=False)
    for column in ("#", "verdict", "tags", "evidence", "ms"):
        table.add_column(column)
    for report in sorted(reports, key=lambda r: r.index):
        evidence = report.evidence[0] if report.evidence else None
        source = f"{evidence.title or evidence.source}" if evidence else (report.verdict.reason or "")
        tags = ", ".join(f"{t.type}:{t.text}" + (f"→{t.replacement}" if t.replacement else "") for t in report.tags)
        total = sum(report.timings_ms.values())
        style = VERDICT_STYLE.get(report.verdict.label, "")
        table.add_row(str(report.index), Text(report.verdict.label, style=style), tags, source, f"{total:.0f}")
    return table


def print_checked(
    message: str,
    reports: Sequence[SentenceReport],
    summary: StreamSummary | None = None,
    console: Console | None = None,
) -> None:
    console = console or Console()
    parts: list[object] = [annotated_text(message, reports), Text(""), reports_table(reports)]
    if summary is not None:
        mix = ", ".join(f"{label}: {count}" for label, count in sorted(summary.verdicts.items()))
        line = f"verdicts: {mix}"
        if summary.attr_auto is not None:
            line += f"   auto-AIS: {summary.attr_auto:.2f}"
        parts.append(Text(line, style="bold"))
    console.print(Group(*parts))
