"""Cross-encoders over (first, second) pairs: NLI and relevance."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Encoding

from middleware.runtime.encoder import BatchedEncoder
from middleware.settings import RuntimeSettings

RELEVANCE = "relevance"


class OnnxPairScorer(BatchedEncoder):
    """Implements ``middleware.interfaces.PairScorer``.

    - nli: softmax over the classifier's logits; ``labels`` are the manifest's, in output order
      (pairs are (premise, hypothesis) = (evidence, claim)).
    - rerank: one column, ``labels == ["relevance"]``, in [0, 1]: the sigmoid of a single
      logit (the usual ms-marco cross-encoder), or for a classifier with several outputs the
      softmax probability of its last class (e.g. 'relevant' of [irrelevant, relevant]).
      Pairs are (query, passage).
    """

    def __init__(self, directory: Path, settings: RuntimeSettings, task: str, name: str | None = None) -> None:
        if task not in ("nli", "rerank"):
            raise ValueError(f"a pair scorer is for nli or rerank, not {task!r}")
        self.task = task
        super().__init__(directory, settings, name)
        self.labels: list[str] = [RELEVANCE] if task == "rerank" else list(self.manifest.labels)
        if task == "nli" and len(self.labels) < 2:
            raise ValueError(f"{directory}: an nli model needs at least two labels, has {self.labels}")

    async def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Through the shared micro-batcher: [n, len(labels)] probabilities."""
        return await self._infer(list(pairs), len(self.labels))

    def score_sync(self, pairs: Sequence[tuple[str, str]], batch_size: int | None = None) -> np.ndarray:
        """Blocking, without the batcher: for offline evaluation."""
        return self._infer_sync(self.tokenizer.encode_pairs(pairs), len(self.labels), batch_size)

    def _encode_items(self, items: Sequence[tuple[str, str]]) -> list[Encoding]:
        return self.tokenizer.encode_pairs(items)

    def _warmup_encodings(self) -> list[Encoding]:
        return self.tokenizer.encode_pairs([("warm up", "warm up")])

    def _postprocess(self, output: np.ndarray) -> np.ndarray:
        logits = output.astype(np.float32, copy=False)
        if self.task == "nli":
            return softmax(logits)
        if logits.shape[1] == 1:
            return 1.0 / (1.0 + np.exp(-logits))
        return softmax(logits)[:, -1:]


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)
