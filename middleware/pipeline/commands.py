"""``factcheck verify`` (claims against given evidence, JSON lines in and out; a stable
interface) and ``factcheck eval-verify`` (balanced accuracy on WiCE and FEVER-Symmetric)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from middleware.pipeline.decontext import SpacyDecontextualiser
from middleware.pipeline.stages import map_to_sentence
from middleware.pipeline.verifiers import Verifier, passages_from_texts
from middleware.settings import load_settings

_BACKEND_HELP = "verifier backend: slots, nli, hybrid or llm (default: settings pipeline.verifier)"


def _verifier(backend: str | None) -> Verifier:
    from middleware.pipeline.factory import build_verifier

    return build_verifier(load_settings(), backend)


async def verify_record(verifier: Verifier, record: dict[str, Any]) -> dict[str, Any]:
    """One ``factcheck verify`` record: {"claim", "evidence": [str], "context"?} ->
    {"label", "scores", "evidence_index", "span"}. With a context the claim is first
    decontextualised; the span is always in the claim's own offsets."""
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


def eval_verify(
    wice: Annotated[Path | None, typer.Option(help="WiCE claim_dev.jsonl")] = None,
    fever_symmetric: Annotated[Path | None, typer.Option(help="FEVER-Symmetric jsonl file or folder")] = None,
    backend: Annotated[list[str] | None, typer.Option(help=_BACKEND_HELP + "; repeatable")] = None,
    limit: Annotated[int | None, typer.Option(help="first N examples of each set")] = None,
) -> None:
    """Balanced accuracy (attributable vs not) per backend and data set."""
    from middleware.pipeline.evaluation import evaluate, load_fever_symmetric, load_wice

    sets = []
    if wice:
        sets.append(("wice", load_wice(wice)[:limit]))
    if fever_symmetric:
        sets.append(("fever-symmetric", load_fever_symmetric(fever_symmetric)[:limit]))
    if not sets:
        raise typer.BadParameter("give --wice and/or --fever-symmetric")
    typer.echo(
        f"{'backend':8} {'dataset':16} {'n':>5} {'bal.acc':>8} {'3-way':>6} {'ms/claim':>9}  predicted"
    )

    async def run() -> None:
        for name in backend or ["slots"]:
            verifier = _verifier(name)
            for dataset, examples in sets:
                result = await evaluate(verifier, examples, dataset)
                per_claim = 1000 * result.seconds / max(1, result.n)
                typer.echo(
                    f"{verifier.name:8} {dataset:16} {result.n:5d} {result.balanced_accuracy:8.3f} "
                    f"{result.three_way_accuracy:6.3f} {per_claim:9.1f}  {json.dumps(result.counts())}"
                )

    asyncio.run(run())


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)
    app.command("eval-verify")(eval_verify)
