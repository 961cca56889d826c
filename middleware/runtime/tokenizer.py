"""Tokenisation for the runtime: the export's ``tokenizer.json`` through the Rust ``tokenizers``
library (no transformers import), truncated to the manifest's length, padded per batch.

A text is cut to ``max_length * MAX_CHARS_PER_TOKEN`` characters before it is tokenised:
``tokenizers`` truncates only after tokenising the whole text, and a 900 KB document took
seconds. The served models tokenise each batch in their batcher's worker thread
(``middleware.runtime.encoder``); ``encode_async`` does the same for other online callers,
tokenising a large batch in a worker thread (the Rust library releases the GIL)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Encoding, Tokenizer

MAX_CHARS_PER_TOKEN = 100
"""WordPiece's longest word (``max_input_chars_per_word``; past it a word is one [UNK]) and more
than any vocabulary entry: a text cut to ``max_length * 100`` characters yields the same first
``max_length`` tokens as the whole text unless it is made of words longer than that."""
INLINE_CHARS = 20_000
"""Batches of up to this many characters are tokenised inline (well under a millisecond's
worth of work per thousand characters: a thread hop would cost more)."""

_ARRAYS = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}


class TextTokenizer:
    """Encodes texts or (first, second) pairs; ``collate`` pads encodings to the longest one
    and returns the arrays named by ``input_names`` (int64)."""

    def __init__(self, path: Path, max_length: int, input_names: Sequence[str]) -> None:
        self.tokenizer = Tokenizer.from_file(str(path))
        self.pad_id = _pad_id(self.tokenizer)
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length)
        unknown = [n for n in input_names if n not in _ARRAYS]
        if unknown:
            raise ValueError(f"{path}: cannot produce model inputs {unknown}")
        self.input_names = list(input_names)
        self.max_length = max_length
        self.max_chars = max_length * MAX_CHARS_PER_TOKEN

    def encode(self, texts: Sequence[str]) -> list[Encoding]:
        return self.tokenizer.encode_batch([t[: self.max_chars] for t in texts]) if texts else []

    def encode_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[Encoding]:
        cap = self.max_chars
        return self.tokenizer.encode_batch([(a[:cap], b[:cap]) for a, b in pairs]) if pairs else []

    async def encode_async(self, texts: Sequence[str]) -> list[Encoding]:
        """``encode``, in a worker thread when the batch is large."""
        if sum(min(len(t), self.max_chars) for t in texts) <= INLINE_CHARS:
            return self.encode(texts)
        return await asyncio.to_thread(self.encode, texts)

    def collate(self, encodings: Sequence[Encoding]) -> dict[str, np.ndarray]:
        width = max((len(e.ids) for e in encodings), default=0)
        arrays = {name: np.zeros((len(encodings), width), dtype=np.int64) for name in self.input_names}
        if "input_ids" in arrays:
            arrays["input_ids"].fill(self.pad_id)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            for name, array in arrays.items():
                array[row, :n] = getattr(enc, _ARRAYS[name])
        return arrays

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)


def _pad_id(tokenizer: Tokenizer) -> int:
    """The padding id the tokenizer file declares, else its pad token's id, else 0."""
    padding = tokenizer.padding
    if padding and padding.get("pad_id") is not None:
        return int(padding["pad_id"])
    for token in ("[PAD]", "<pad>"):
        if (token_id := tokenizer.token_to_id(token)) is not None:
            return token_id
    return 0
