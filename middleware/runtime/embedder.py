"""Sentence embeddings from an exported encoder (pooling is in the graph; see onnx_models.export)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Encoding

from middleware.runtime.encoder import BatchedEncoder
from middleware.settings import RuntimeSettings


class OnnxEmbedder(BatchedEncoder):
    """Implements ``middleware.interfaces.Embedder``: rows are L2-normalised float32 [n, dim]."""

    task = "embed"

    def __init__(self, directory: Path, settings: RuntimeSettings, name: str | None = None) -> None:
        super().__init__(directory, settings, name)
        if self.manifest.dim is None:
            raise ValueError(f"{directory}: the manifest of an embedding model must give dim")
        self.dim: int = self.manifest.dim

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Through the shared micro-batcher: for concurrent online callers."""
        return await self._infer(list(texts), self.dim)

    def embed_sync(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Blocking, without the batcher: for offline jobs such as indexing."""
        return self._infer_sync(self.tokenizer.encode(texts), self.dim, batch_size)

    def _encode_items(self, items: Sequence[str]) -> list[Encoding]:
        return self.tokenizer.encode(items)

    def _postprocess(self, output: np.ndarray) -> np.ndarray:
        return normalize(output)


def normalize(rows: np.ndarray) -> np.ndarray:
    rows = rows.astype(np.float32, copy=False)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.maximum(norms, 1e-12)
