"""``factcheck edit``, ``eval-edit``, ``make-edit-data`` and ``train-editor``."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

Backend = Annotated[str, typer.Option(help="editor: slots (offline), llm (RARR prompts) or seq2seq (PURR FiD)")]
Model = Annotated[str | None, typer.Option(help="seq2seq editor: hub id, checkpoint dir or ONNX export dir")]
VerifierName = Annotated[
    str, typer.Option(help="verifier that gates edits and scores Attr_auto: auto (hybrid if an NLI model is "
                      "available offline, else slots), slots, nli or hybrid")
]  # fmt: skip
Embed = Annotated[bool, typer.Option(help="align with the embedding model too (exports MiniLM on first use)")]


def register(app: typer.Typer) -> None:
    app.command("edit")(edit)
    app.command("eval-edit")(eval_edit)
    app.command("make-edit-data")(make_edit_data)
    app.command("train-editor")(train_editor)


def _components(backend: str, model: str | None, verifier_name: str, embed: bool):
    from middleware.revise.factory import build_editor, build_eval_verifier
    from middleware.settings import load_settings

    settings = load_settings()
    verifier = build_eval_verifier(settings, verifier_name, embed=embed)
    return verifier, build_editor(settings, verifier, backend=backend, model=model)


def edit(
    file: Annotated[str, typer.Argument(help="JSON lines {text, evidence: [str], context?}; '-' for stdin")] = "-",
    backend: Backend = "slots",
    model: Model = None,
    verifier: VerifierName = "auto",
    embed: Embed = False,
) -> None:
    """Revise each text to agree with its evidence (no search). Writes one JSON line each:
    {text, edits: [{start, end, original, replacement, tag, evidence_index}], fava}."""
    from middleware.pipeline.verifiers.base import passages_from_texts
    from middleware.revise.data import read_lines
    from middleware.revise.evaluation import row_fields
    from middleware.revise.runner import revise

    checker, editor = _components(backend, model, verifier, embed)

    async def run() -> None:
        for row in read_lines(file):
            text, evidence_texts, context = row_fields(row)
            evidence = passages_from_texts(evidence_texts)
            revision = await revise(text, evidence, checker, editor, context)
            sys.stdout.write(json.dumps(revision.to_json(evidence), ensure_ascii=False) + "\n")
            sys.stdout.flush()

    asyncio.run(run())


def eval_edit(
    file: Annotated[Path, typer.Argument(help="JSON lines {text, evidence?, context?, original?, type?}")],
    backend: Backend = "slots",
    model: Model = None,
    verifier: VerifierName = "auto",
    embed: Embed = False,
    limit: Annotated[int, typer.Option(help="evaluate only the first N lines (0: all)")] = 0,
    clean: Annotated[bool, typer.Option(help="edit the correct 'original' texts instead: spurious-edit check")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Attr_auto before/after, Pres_Lev, F1_AP, PURR edit classes and exact-fix rate."""
    from middleware.revise.data import read_lines
    from middleware.revise.evaluation import evaluate

    checker, editor = _components(backend, model, verifier, embed)
    rows = list(read_lines(file))
    rows = rows[:limit] if limit else rows
    if clean:
        rows = [row | {"text": row["original"]} for row in rows if isinstance(row.get("original"), str)]
    started = time.perf_counter()
    report = asyncio.run(evaluate(rows, checker, editor))
    summary = {"file": str(file) + (" (clean originals)" if clean else ""), "editor": editor.name,
               "verifier": checker.name} | report.summary()
    summary["seconds_per_line"] = round((time.perf_counter() - started) / max(len(rows), 1), 3)
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    _print_summary(summary)


def _print_summary(summary: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 150))
    console.print(
        f"[bold]{summary['file']}[/bold]: editor [cyan]{summary['editor']}[/cyan], Attr_auto by the "
        f"[cyan]{summary['verifier']}[/cyan] verifier's P(attributable), {summary['n']} lines, "
        f"{summary['seconds_per_line']} s/line (verify + edit p50 {summary.get('revise_ms_p50')} ms, "
        f"p95 {summary.get('revise_ms_p95')} ms)"
    )
    table = Table("set", "n", "Attr before", "Attr after", "Pres", "F1_AP before", "F1_AP", "edited", "good",
                  "bad", "huge", "unnec.", "exact fix")  # fmt: skip
    rows = [("all", summary)] + list(summary.get("by_type", {}).items())
    for name, s in rows:
        rates = s["class_rate_edited"]
        table.add_row(
            name, str(s["n"]), f"{s['attr_before']:.3f}", f"{s['attr_after']:.3f}", f"{s['preservation']:.3f}",
            f"{s['f1_ap_before']:.3f}", f"{s['f1_ap']:.3f}", f"{s['edited']:.2f}",
            *(f"{rates[c]:.2f}" for c in ("good", "bad", "huge", "unnecessary")),
            f"{s['exact_fix']:.3f}" if "exact_fix" in s else "-",
        )  # fmt: skip
    console.print(table)
    console.print("class rates are shares of the edited lines; exact fix is over lines that give 'original'")


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
    from middleware.revise.data import build_instances, load_corpus, write_instances

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
    from middleware.revise.training import EditorTrainConfig, train_editor as run

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = EditorTrainConfig(
        data=data, base=base, out=out, epochs=epochs, lr=lr, batch_size=batch_size, grad_accum=grad_accum,
        max_evidence=max_evidence, max_length=max_length, max_target=max_target, dev_share=dev_share,
        device=device, precision=precision, max_minutes=max_minutes, seed=seed, export=export, quantize=quantize,
        threads=threads,
    )  # fmt: skip
    result = run(config)
    typer.echo(json.dumps(result, indent=2))
