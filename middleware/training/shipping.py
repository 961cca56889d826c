"""The shipped NLI model: a training run turned into a model directory (ONNX int8 export of the
best checkpoint through the project exporter, with the run record next to it), and such an
export scored synchronously (``OnnxNli``: calibration and ``eval-verifier``)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

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


class OnnxNli:
    """An exported NLI model through the runtime's pair scorer, scored synchronously;
    ``probs`` returns probabilities in ``NLI_HEAD_LABELS`` order whatever the export's column order."""

    def __init__(self, directory: Path, threads: int = 2) -> None:
        from middleware.runtime.loading import load_pair_scorer
        from middleware.settings import RuntimeSettings

        settings = RuntimeSettings(provider="cpu", intra_op_threads=threads)
        self.scorer = load_pair_scorer(str(directory), "nli", settings)
        self.manifest = self.scorer.manifest
        self.columns = [self.scorer.labels.index(name) for name in NLI_HEAD_LABELS]

    def probs(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
        return self.scorer.score_sync(list(pairs), batch_size)[:, self.columns]
