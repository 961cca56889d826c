"""Greedy generation with an exported encoder-decoder (T5-like), including fusion-in-decoder.

The decoder graph takes the whole prefix and the encoder states each step (no KV cache), so
its cost grows with the output length; that is fine for the short edits and questions it
writes. Fusion-in-decoder (PURR's editor): encode each (claim, evidence) text separately,
concatenate the encoder states of one group along the sequence axis (``fuse``), decode once.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from middleware.runtime.integrity import read_model_manifest
from middleware.runtime.onnx_session import load_graph
from middleware.runtime.tokenizer import TextTokenizer
from middleware.settings import RuntimeSettings


def fuse(states: np.ndarray, mask: np.ndarray, group_sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate the encodings of consecutive rows: rows ``[0, g0)`` become fused row 0, the
    next ``g1`` rows fused row 1, and so on. Padding positions stay masked out, so fused rows
    of different total length are right-padded with masked zeros."""
    if sum(group_sizes) != states.shape[0] or any(g < 1 for g in group_sizes):
        raise ValueError(f"group sizes {list(group_sizes)} do not partition {states.shape[0]} rows")
    bounds = np.cumsum([0, *group_sizes])
    width = max(int(g) for g in group_sizes) * states.shape[1]
    fused = np.zeros((len(group_sizes), width, states.shape[2]), dtype=states.dtype)
    fused_mask = np.zeros((len(group_sizes), width), dtype=mask.dtype)
    for row, (start, end) in enumerate(itertools.pairwise(bounds)):
        n = (end - start) * states.shape[1]
        fused[row, :n] = states[start:end].reshape(n, states.shape[2])
        fused_mask[row, :n] = mask[start:end].reshape(n)
    return fused, fused_mask


class OnnxSeq2Seq:
    """An exported seq2seq model: ``generate(texts)`` and ``generate_fused(groups)`` decode
    greedily and return strings; ``encode`` and ``greedy`` expose the two halves."""

    def __init__(self, directory: Path, settings: RuntimeSettings) -> None:
        self.directory = Path(directory)
        self.manifest = read_model_manifest(self.directory, "seq2seq", settings)
        self.tokenizer = TextTokenizer(
            self.directory / "tokenizer.json", self.manifest.max_length, self.manifest.inputs["encoder"]
        )
        self.encoder = load_graph(self.directory, self.manifest, "encoder", settings)
        self.decoder = load_graph(self.directory, self.manifest, "decoder", settings)
        tokens = self.manifest.special_tokens
        self.pad_id, self.eos_id, self.start_id = tokens["pad"], tokens["eos"], tokens["decoder_start"]
        self.generate(["warm up"], max_new_tokens=2)

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Encoder states [n, seq, d] and their attention mask [n, seq]."""
        feeds = self.tokenizer.collate(self.tokenizer.encode(texts))
        return self.encoder.run(feeds)[0], feeds["attention_mask"]

    def greedy(self, states: np.ndarray, mask: np.ndarray, max_new_tokens: int = 64) -> list[list[int]]:
        """Token ids (start and eos excluded) decoded greedily for each row of ``states``."""
        rows = states.shape[0]
        ids = np.full((rows, 1), self.start_id, dtype=np.int64)
        done = np.zeros(rows, dtype=bool)
        device_states, device_mask = self.decoder.to_device(states), self.decoder.to_device(mask.astype(np.int64))
        for _ in range(max_new_tokens):
            feeds = {"decoder_input_ids": ids, "encoder_hidden_states": device_states,
                     "encoder_attention_mask": device_mask}
            step = self.decoder.run(feeds)[0][:, -1, :].argmax(axis=-1)
            step = np.where(done, self.pad_id, step)
            ids = np.concatenate([ids, step[:, None]], axis=1)
            done |= step == self.eos_id
            if done.all():
                break
        return [_strip(row, self.eos_id) for row in ids[:, 1:].tolist()]

    def generate(self, texts: Sequence[str], max_new_tokens: int = 64) -> list[str]:
        if not texts:
            return []
        states, mask = self.encode(texts)
        return [self.tokenizer.decode(ids) for ids in self.greedy(states, mask, max_new_tokens)]

    def generate_fused(self, groups: Sequence[Sequence[str]], max_new_tokens: int = 64) -> list[str]:
        """One output per group; each group's texts are encoded apart and decoded together."""
        if not groups:
            return []
        flat = [text for group in groups for text in group]
        states, mask = fuse(*self.encode(flat), [len(g) for g in groups])
        return [self.tokenizer.decode(ids) for ids in self.greedy(states, mask, max_new_tokens)]


def _strip(ids: list[int], eos: int) -> list[int]:
    return ids[: ids.index(eos)] if eos in ids else ids
