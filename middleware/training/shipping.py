"""Turning a training run into a shipped model directory: ONNX int8 export of the best
checkpoint through the project exporter, with the run record next to it."""

from __future__ import annotations

import shutil
from pathlib import Path

from middleware.types import NLI_HEAD_LABELS


def export_run(run_dir: Path, out: Path, max_length: int = 256, quantize: str = "int8") -> Path:
    """Export ``run_dir/checkpoint`` as an ``nli`` model into ``out`` and copy
    ``train_meta.json`` beside it (outside the manifest's checksums, like MODEL_CARD.md)."""
    from onnx_models.export import export_model

    export_model(
        run_dir / "checkpoint", task="nli", out=out, quantize=quantize, max_length=max_length, labels=list(NLI_HEAD_LABELS)
    )
    shutil.copy2(run_dir / "train_meta.json", out / "train_meta.json")
    return out
