"""``factcheck index`` and ``factcheck search``: build the local index and look in it by hand."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from middleware.settings import Settings, load_settings

if TYPE_CHECKING:
    from middleware.evidence.index import IndexEmbedder

__all__ = ["register"]

_INDEX_HELP = "index directory [FACTCHECK_INDEX_DIR; default evidence.index_dir]"


def _load_embedder(settings: Settings) -> IndexEmbedder:
    from middleware.runtime import load_embedder

    return load_embedder(settings.runtime)


def _setup(config: Path | None, index_dir: Path | None) -> tuple[Settings, Path]:
    settings = load_settings(config, **{"evidence.index_dir": index_dir})
    logging.basicConfig(level=settings.log_level, format="%(levelname)s %(name)s: %(message)s")
    return settings, settings.evidence.index_dir


def index(
    paths: Annotated[list[Path], typer.Argument(help="files or directories: .txt .md .html .jsonl")],
    index_dir: Annotated[Path | None, typer.Option("--index", help=_INDEX_HELP)] = None,
    text_field: Annotated[str, typer.Option(help="JSON lines: field holding the text")] = "text",
    title_field: Annotated[str, typer.Option(help="JSON lines: field holding the title")] = "title",
    url_field: Annotated[str, typer.Option(help="JSON lines: field holding the URL")] = "url",
    dense: Annotated[bool, typer.Option(help="embed passages for dense retrieval (off: BM25 only)")] = True,
    config: Annotated[Path | None, typer.Option(help="YAML settings file [FACTCHECK_CONFIG]")] = None,
) -> None:
    """Index documents (incremental: only new and changed files are read and embedded;
    indexed files gone from PATHS are removed). Also updates the QUIP Data Portrait."""
    from middleware.evidence.documents import JsonlFields
    from middleware.evidence.index import LocalIndex

    settings, directory = _setup(config, index_dir)
    console = Console(stderr=True)
    embedder = _load_embedder(settings) if dense else None
    fields = JsonlFields(text=text_field, title=title_field, url=url_field)
    with (
        LocalIndex.from_settings(directory, embedder, settings.evidence) as local,
        Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=True,
        ) as progress,
    ):
        tasks: dict[str, int] = {}

        def report(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task("reading files" if stage == "read" else "embedding", total=total)
            progress.update(tasks[stage], completed=done, total=total)

        stats = local.update(paths, fields, report)
    rate = stats.passages_added / stats.seconds if stats.seconds > 0 else 0.0
    typer.echo(
        f"{directory}: {stats.added} added, {stats.updated} updated, {stats.unchanged} unchanged, "
        f"{stats.removed} removed, {len(stats.skipped)} skipped files; passages +{stats.passages_added} "
        f"-{stats.passages_removed} = {stats.passages_total}, {stats.embedded} embedded; "
        f"{stats.seconds:.1f} s ({rate:.0f} passages/s)"
    )
    for line in stats.skipped:
        typer.echo(f"skipped {line}", err=True)


def search(
    query: Annotated[str, typer.Argument(help="what to look for")],
    index_dir: Annotated[Path | None, typer.Option("--index", help=_INDEX_HELP)] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="passages to show")] = 5,
    config: Annotated[Path | None, typer.Option(help="YAML settings file [FACTCHECK_CONFIG]")] = None,
) -> None:
    """Search the local index (BM25 and dense, fused) and print the best passages."""
    from middleware.evidence.index import LocalIndex

    settings, directory = _setup(config, index_dir)
    if not LocalIndex.exists(directory):
        typer.echo(f"no index at {directory}: run `factcheck index PATH... --index {directory}` first", err=True)
        raise typer.Exit(2)
    with LocalIndex.from_settings(directory, None, settings.evidence, portrait=False) as local:
        if local.embedded_with:
            local.embedder = _load_embedder(settings)
        results = local.search(query, k)
        total = len(local)
    table = Table(title=f"{query!r}: {len(results)} of {total} passages", show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("title / source", overflow="fold", max_width=36)
    table.add_column("passage", overflow="fold")
    for rank, p in enumerate(results, start=1):
        table.add_row(str(rank), f"{p.score:.4f}", f"{p.title or ''}\n[dim]{p.source}:{p.start}-{p.end}[/dim]", p.text)
    Console(width=max(Console().width, 100)).print(table)


def register(app: typer.Typer) -> None:
    app.command("index")(index)
    app.command("search")(search)
