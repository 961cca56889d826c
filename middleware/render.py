"""Rendering of reports for the terminal (rich: sentences coloured by verdict, FAVA tags and
suggested corrections inline, then a table of the reports; ``factcheck demo`` and ``check``).
The wire rendering is ``middleware.chat.wire``."""

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


def corrections_text(reports: Sequence[SentenceReport]) -> Text:
    """Correct mode's decision for each contradicted sentence: the edit applied and the one
    evidence sentence it came from, or why the sentence was flagged and left as written."""
    text = Text()
    for report in sorted(reports, key=lambda r: r.index):
        revision = report.revision
        if revision is None:
            continue
        if revision.status == "applied":
            text.append(f"#{report.index} corrected: ", style="bold green")
            text.append(f"{report.text.strip()}\n", style="red strike")
            text.append(f"   -> {(report.corrected_text or '').strip()}\n", style="green")
        else:
            text.append(f"#{report.index} flagged, left as written: ", style="bold red")
            text.append(f"{report.text.strip()}\n")
            rule = f" (gate rule {revision.rule})" if revision.rule else ""
            text.append(f"   why{rule}: {revision.reason}\n", style="dim")
            if revision.suggested and revision.suggested != report.text:
                text.append(f"   suggested, not applied: {revision.suggested.strip()}\n", style="yellow")
        if revision.evidence_sentence:
            text.append(f"   evidence: {revision.evidence_sentence.strip()}\n", style="cyan")
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


def attribution_text(summary: StreamSummary) -> Text:
    """The attribution report: each passage with the sentences it supports and contradicts."""
    text = Text()
    links = {(link.provider, link.passage_id): link for link in summary.attribution_links}
    for passage in summary.attribution_report:
        link = links.get((passage.provider, passage.id))
        text.append(f"{passage.title or passage.source}", style="bold")
        if link is not None and link.supports:
            text.append(f"  supports #{', #'.join(map(str, link.supports))}", style="green")
        if link is not None and link.contradicts:
            text.append(f"  contradicts #{', #'.join(map(str, link.contradicts))}", style="red")
        snippet = " ".join(passage.text.split())
        text.append(f"\n   {snippet[:160]}{'...' if len(snippet) > 160 else ''}\n", style="dim")
    return text


def print_checked(
    message: str,
    reports: Sequence[SentenceReport],
    summary: StreamSummary | None = None,
    console: Console | None = None,
) -> None:
    console = console or Console()
    parts: list[object] = [annotated_text(message, reports), Text(""), reports_table(reports)]
    corrections = corrections_text(reports)
    if corrections.plain:
        parts += [Text(""), corrections]
    if summary is not None:
        mix = ", ".join(f"{label}: {count}" for label, count in sorted(summary.verdicts.items()))
        line = f"verdicts: {mix}"
        if summary.attr_auto is not None:
            line += f"   auto-AIS: {summary.attr_auto:.2f}"
        parts.append(Text(line, style="bold"))
        if summary.attribution_report:
            parts += [Text("attribution report:", style="bold"), attribution_text(summary)]
    console.print(Group(*parts))
