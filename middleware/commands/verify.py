"""``factcheck verify``: claims against given evidence, JSON lines in and out (a stable
interface). Its evaluation is ``factcheck eval-verifier`` (``middleware.evaluation.commands``)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from middleware.settings import load_settings

if TYPE_CHECKING:
    from middleware.pipeline.verifiers import Verifier

_BACKEND_HELP = "verifier backend: slots, nli, hybrid or llm (default: settings pipeline.verifier)"


def _verifier(backend: str | None) -> Verifier:
    from middleware.composition.backends import build_verifier

    return build_verifier(load_settings(), backend)


async def verify_record(verifier: Verifier, record: dict[str, Any]) -> dict[str, Any]:
    """One ``factcheck verify`` record: {"claim", "evidence": [str], "context"?} ->
    {"label", "scores", "evidence_index", "span"}. With a context the claim is first
    decontextualised; the span is always in the claim's own offsets."""
    from middleware.pipeline.decontext import SpacyDecontextualiser
    from middleware.pipeline.stages import map_to_sentence
    from middleware.pipeline.verifiers import passages_from_texts

    claim, evidence = record["claim"], record.get("evidence") or []
    if (
        not isinstance(claim, str)
        or not isinstance(evidence, list)
        or not all(isinstance(e, str) for e in evidence)
    ):
        raise ValueError('expected {"claim": str, "evidence": [str, ...], "context": str (optional)}')
    context = record.get("context")
    rewritten = SpacyDecontextualiser().resolve(claim, [context]) if context else None
    verdict = await verifier.verify(
        rewritten.text if rewritten else claim, passages_from_texts(evidence), context
    )
    if rewritten is not None:
        verdict = map_to_sentence(verdict, rewritten)
    return {
        "label": verdict.label,
        "scores": {k: round(float(v), 4) for k, v in verdict.scores.items()},
        "evidence_index": verdict.evidence_index,
        "span": list(verdict.span) if verdict.span else None,
    }


async def _verify_stream(verifier: Verifier, source: TextIO, sink: TextIO, concurrency: int = 8) -> int:
    """Read JSON lines, verify up to ``concurrency`` at once, write results in input order."""
    semaphore = asyncio.Semaphore(concurrency)
    errors = 0

    async def one(line: str) -> dict[str, Any]:
        async with semaphore:
            try:
                return await verify_record(verifier, json.loads(line))
            except (ValueError, KeyError, TypeError) as exc:
                return {"label": None, "error": str(exc)}

    batch: list[str] = []
    for line in [*source, None]:
        if line is not None and line.strip():
            batch.append(line)
        if batch and (line is None or len(batch) >= 64):
            for result in await asyncio.gather(*(one(x) for x in batch)):
                errors += "error" in result
                sink.write(json.dumps(result) + "\n")
            sink.flush()
            batch = []
    return errors


def verify(
    file: Annotated[str, typer.Argument(help="JSON lines file, or - for stdin")] = "-",
    backend: Annotated[str | None, typer.Option(help=_BACKEND_HELP)] = None,
) -> None:
    """Verify claims against given evidence (no search). Input lines: {"claim": str,
    "evidence": [str, ...], "context": str (optional)}; output lines: {"label", "scores",
    "evidence_index", "span"}."""
    verifier = _verifier(backend)
    source = sys.stdin if file == "-" else open(file, encoding="utf-8")  # noqa: SIM115
    try:
        errors = asyncio.run(_verify_stream(verifier, source, sys.stdout))
    finally:
        if source is not sys.stdin:
            source.close()
    if errors:
        typer.echo(f"{errors} input line(s) were invalid", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)
