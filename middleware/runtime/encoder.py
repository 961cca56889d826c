"""What the embedder and the pair scorer share: an exported encoder graph, its tokenizer, its
session, and a micro-batcher that feeds it token sequences from every caller."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Encoding

from middleware.runtime.batcher import MicroBatcher
from middleware.runtime.onnx_session import OnnxSession, get_session
from middleware.runtime.tokenizer import TextTokenizer
from middleware.settings import RuntimeSettings
from onnx_models.manifest import Manifest, read_manifest


class BatchedEncoder:
    """Loads ``directory`` (an export of ``task``) and serves it two ways: ``_infer`` through
    the batcher for online calls, ``_infer_sync`` in length-sorted batches for offline jobs.
    Subclasses turn the graph's output into rows (``_postprocess``)."""

    task: str = ""

    def __init__(self, directory: Path, settings: RuntimeSettings, name: str | None = None) -> None:
        self.directory = Path(directory)
        self.manifest: Manifest = read_manifest(self.directory, verify=settings.verify_checksums)
        if self.manifest.task != self.task:
            raise ValueError(f"{directory} holds a {self.manifest.task} model, not {self.task}")
        self.tokenizer = TextTokenizer(
            self.directory / "tokenizer.json", self.manifest.max_length, self.manifest.inputs["model"]
        )
        self.session: OnnxSession = get_session(self.directory / self.manifest.graphs["model"], settings)
        self.name = name or f"{self.task}:{self.directory.name}"
        # Dynamically quantised int8 graphs compute one activation scale over the whole input
        # tensor, so a sequence's scores would depend on what else (and how much padding) shares
        # its batch: one user's traffic would move another's verdict. Such graphs run one
        # sequence per inference. On 2 CPU threads this costs nothing (the int8 verifier
        # scores ~200 pairs/s alone or in batches of 32: padding eats what batching saves).
        self.per_sequence = "model" in self.manifest.quantized_graphs and self.manifest.quantization == "int8"
        self.sync_batch_size = settings.sync_batch_size
        self.batcher: MicroBatcher[Encoding, np.ndarray] = MicroBatcher(
            self._rows, settings.max_batch, settings.max_wait_ms, name=self.name, size_of=_length
        )
        self._forward(self._warmup_encodings())

    def _warmup_encodings(self) -> list[Encoding]:
        return self.tokenizer.encode(["warm up"])

    def _postprocess(self, output: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _forward(self, encodings: Sequence[Encoding]) -> np.ndarray:
        if self.per_sequence and len(encodings) > 1:
            return np.concatenate([self._forward([encoding]) for encoding in encodings])
        feeds = self.tokenizer.collate(encodings)
        return self._postprocess(self.session.run(feeds)[0])

    def _rows(self, encodings: list[Encoding]) -> list[np.ndarray]:
        return list(self._forward(encodings))

    async def _infer(self, encodings: Sequence[Encoding], width: int) -> np.ndarray:
        if not encodings:
            return np.zeros((0, width), dtype=np.float32)
        return np.stack(await self.batcher.submit_many(encodings))

    def _infer_sync(self, encodings: Sequence[Encoding], width: int, batch_size: int | None) -> np.ndarray:
        """Big offline batches, sorted by length to limit padding; rows in input order."""
        out = np.zeros((len(encodings), width), dtype=np.float32)
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        step = batch_size or self.sync_batch_size
        for start in range(0, len(order), step):
            chunk = order[start : start + step]
            out[chunk] = self._forward([encodings[i] for i in chunk])
        return out

    async def aclose(self) -> None:
        await self.batcher.aclose()


def _length(encoding: Encoding) -> int:
    return len(encoding.ids)
