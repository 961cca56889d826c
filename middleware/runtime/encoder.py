"""What the embedder and the pair scorer share: an exported encoder graph, its tokenizer, its
session, and a micro-batcher that feeds it the inputs of every caller.

The batcher queues raw inputs (texts or pairs) and tokenises each batch at once in its worker
thread: the event loop never tokenises, and the Rust tokenizer encodes a batch in parallel.
Length bucketing uses an estimate from the characters (``estimated_tokens``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Encoding

from middleware.runtime.batcher import MicroBatcher
from middleware.runtime.integrity import read_model_manifest
from middleware.runtime.onnx_session import OnnxSession, load_graph
from middleware.runtime.precision import INT8, Device
from middleware.runtime.tokenizer import TextTokenizer
from middleware.settings import RuntimeSettings
from onnx_models.manifest import Manifest


class BatchedEncoder:
    """Loads ``directory`` (an export of ``task``) and serves it two ways: ``_infer`` through
    the batcher for online calls, ``_infer_sync`` in length-sorted batches for offline jobs.
    Subclasses turn the graph's output into rows (``_postprocess``)."""

    task: str = ""

    def __init__(self, directory: Path, settings: RuntimeSettings, name: str | None = None) -> None:
        self.directory = Path(directory)
        self.manifest: Manifest = read_model_manifest(self.directory, self.task, settings)
        self.tokenizer = TextTokenizer(
            self.directory / "tokenizer.json", self.manifest.max_length, self.manifest.inputs["model"]
        )
        self.session: OnnxSession = load_graph(self.directory, self.manifest, "model", settings)
        self.name = name or f"{self.task}:{self.directory.name}"
        # Dynamically quantised int8 graphs compute one activation scale over the whole input
        # tensor, so a sequence's scores would depend on what else (and how much padding) shares
        # its batch: one user's traffic would move another's verdict. Such graphs run one
        # sequence per inference. On 2 CPU threads this costs nothing (the int8 verifier
        # scores ~200 pairs/s alone or in batches of 32: padding eats what batching saves).
        self.per_sequence = self.session.precision == INT8
        self.sync_batch_size = settings.sync_batch_size
        limits = batch_limits(settings, self.session.device)
        self.batcher: MicroBatcher[Any, np.ndarray] = MicroBatcher(
            self._rows, limits.max_batch, limits.max_wait_ms, name=self.name, size_of=self.estimated_tokens,
            pad_slack=limits.pad_slack, in_flight=limits.in_flight,
        )
        self._forward(self._warmup_encodings())

    def _warmup_encodings(self) -> list[Encoding]:
        return self.tokenizer.encode(["warm up"])

    def _postprocess(self, output: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _encode_items(self, items: Sequence[Any]) -> list[Encoding]:
        """Tokenise the batcher's items (texts or pairs)."""
        raise NotImplementedError

    def estimated_tokens(self, item: str | tuple[str, str]) -> int:
        """Tokens ``item`` will take, from its characters (about 4 per WordPiece token of
        English), capped at the model's length: for bucketing before tokenising."""
        chars = len(item) if isinstance(item, str) else sum(len(part) for part in item)
        return min(self.tokenizer.max_length, chars // CHARS_PER_TOKEN + 2)

    def _forward(self, encodings: Sequence[Encoding]) -> np.ndarray:
        if self.per_sequence and len(encodings) > 1:
            return np.concatenate([self._forward([encoding]) for encoding in encodings])
        feeds = self.tokenizer.collate(encodings)
        return self._postprocess(self.session.run(feeds)[0])

    def _rows(self, items: list[Any]) -> list[np.ndarray]:
        return list(self._forward(self._encode_items(items)))

    async def _infer(self, items: Sequence[Any], width: int) -> np.ndarray:
        if not items:
            return np.zeros((0, width), dtype=np.float32)
        return np.stack(await self.batcher.submit_many(items))

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


CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class BatchLimits:
    max_batch: int
    max_wait_ms: float
    pad_slack: int
    """Padding (tokens) a bucket may waste before the batcher starts another one."""
    in_flight: int = 1
    """Batches run at once (each in its own thread)."""


def batch_limits(settings: RuntimeSettings, device: Device) -> BatchLimits:
    """The micro-batcher's limits on ``device``. A CPU's cost grows with every padded token, so
    batches are cut into buckets of similar length, one at a time (the CPU is the bottleneck).
    On CUDA each inference costs a fixed launch and copies, so a batch is never cut for padding,
    and the next batch is tokenised while the GPU computes the last."""
    if device == "cuda":
        return BatchLimits(
            settings.cuda_max_batch, settings.cuda_max_wait_ms, pad_slack=1 << 30,
            in_flight=settings.cuda_batches_in_flight,
        )
    return BatchLimits(settings.max_batch, settings.max_wait_ms, pad_slack=64)
