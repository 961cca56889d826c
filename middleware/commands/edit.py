"""``factcheck edit``, ``make-edit-data`` and ``train-editor`` (``eval-edit`` is in ``middleware.evaluation.commands``)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from middleware.evaluation.options import Backend, Embed, Model, VerifierName
from middleware.settings import load_settings


def register(app: typer.Typer) -> None:
    app.command("edit")(edit)
    app.command("make-edit-data")(make_edit_data)
    app.command("train-editor")(train_editor)


def edit(
    file: Annotated[str, typer.Argument(help="JSON lines {text, evidence: [str], context?}; '-' for stdin")] = "-",
    backend: Backend = "slots",
    model: Model = None,
    verifier: VerifierName = "auto",
    embed: Embed = False,
) -> None:
    """Revise each text to agree with its evidence (no search). Writes one JSON line each:
    {text, edits: [{start, end, original, replacement, tag, evidence_index}], fava}."""
    from middleware.composition.editor import build_edit_pair
    from middleware.pipeline.verifiers.base import passages_from_texts
    from middleware.training.editor_data import read_lines, row_fields
    from middleware.revise.runner import revise

    checker, editor = build_edit_pair(load_settings(), backend, model, verifier, embed)

    async def run() -> None:
        for row in read_lines(file):
            text, evidence_texts, context = row_fields(row)
            evidence = passages_from_texts(evidence_texts)
            revision = await revise(text, evidence, checker, editor, context)
            sys.stdout.write(json.dumps(revision.to_json(evidence), ensure_ascii=False) + "\n")
            sys.stdout.flush()

    asyncio.run(run())


def make_edit_data(
    corpus: Annotated[list[Path], typer.Option(help="corpus directory of .md/.txt files (repeatable)")],
    out: Annotated[Path, typer.Option(help="output JSON lines")],
    n: Annotated[int, typer.Option(help="instances to make")] = 1000,
    seed: int = 13,
    negatives: Annotated[int, typer.Option(help="negative evidence snippets per instance (PURR pads to 4)")] = 3,
    shorten: Annotated[float, typer.Option(help="share of statements shortened (not verbatim quotes)")] = 0.3,
    per_passage: Annotated[int, typer.Option(help="most instances per corpus paragraph")] = 1,
) -> None:
    """PURR-style editor data: {text (corrupted), original (clean), evidence (gold + negatives), gold, type}."""
    from middleware.training.editor_data import build_instances, load_corpus, write_instances

    passages = load_corpus(corpus)
    if not passages:
        raise typer.BadParameter("no .md or .txt prose found", param_hint="--corpus")
    instances = build_instances(passages, n, seed=seed, negatives=negatives, shorten=shorten, per_passage=per_passage)
    count = write_instances(instances, out)
    kinds: dict[str, int] = {}
    for instance in instances:
        kinds[instance.type] = kinds.get(instance.type, 0) + 1
    typer.echo(f"{count} instances from {len(passages)} paragraphs -> {out} {json.dumps(kinds)}")


def train_editor(
    data: Annotated[list[Path], typer.Option(help="make-edit-data JSON lines (repeatable)")],
    base: Annotated[str, typer.Option(help="T5-family hub id or checkpoint dir, e.g. google/flan-t5-large")],
    out: Annotated[Path, typer.Option(help="run directory: checkpoint/, onnx/, editor.json, train_meta.json")],
    epochs: float = 3.0,
    lr: Annotated[float, typer.Option(help="AdamW learning rate (T5: 1e-4 to 3e-4)")] = 3e-4,
    batch_size: int = 8,
    grad_accum: Annotated[int, typer.Option(help="gradient accumulation steps")] = 1,
    max_evidence: Annotated[int, typer.Option(help="evidence snippets per instance (FiD passages)")] = 4,
    max_length: Annotated[int, typer.Option(help="tokens per (statement, evidence) input")] = 192,
    max_target: Annotated[int, typer.Option(help="tokens of the revised statement")] = 96,
    dev_share: Annotated[float, typer.Option(help="held-out share for exact-match evaluation")] = 0.1,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N")] = "auto",
    precision: Annotated[str, typer.Option(help="fp32, bf16 or fp16 (GPU autocast)")] = "fp32",
    max_minutes: Annotated[float, typer.Option(help="wall-clock budget for training")] = 600.0,
    seed: int = 13,
    threads: Annotated[int | None, typer.Option(help="CPU threads for torch (default: torch's choice)")] = None,
    export: Annotated[bool, typer.Option(help="export the trained model to ONNX for the runtime")] = True,
    quantize: Annotated[str | None, typer.Option(help="int8 to quantise the export")] = None,
) -> None:
    """Fine-tune a seq2seq editor with fusion-in-decoder input on make-edit-data instances."""
    from middleware.training.editor import EditorTrainConfig, train_editor as run

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = EditorTrainConfig(
        data=data, base=base, out=out, epochs=epochs, lr=lr, batch_size=batch_size, grad_accum=grad_accum,
        max_evidence=max_evidence, max_length=max_length, max_target=max_target, dev_share=dev_share,
        device=device, precision=precision, max_minutes=max_minutes, seed=seed, export=export, quantize=quantize,
        threads=threads,
    )  # fmt: skip
    result = run(config)
    typer.echo(json.dumps(result, indent=2))
