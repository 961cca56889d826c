"""Helpers of the tests on the tiny random checkpoints and their ONNX exports (the session
fixtures ``checkpoints``, ``exports`` and ``t5`` of tests/conftest.py): the word list the T5
tokenizer is built on, random texts and pairs over it, and references to compare with.
Importing this module loads no torch; ``_torch_inputs`` needs the train extra (transformers)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from middleware.settings import RuntimeSettings
from middleware.types import NLI_HEAD_LABELS
from onnx_models.manifest import read_manifest

WORDS = [
    "the", "a", "tower", "river", "city", "paris", "france", "was", "is", "in", "on", "of", "built",
    "opened", "completed", "born", "died", "won", "prize", "physics", "chemistry", "1889", "1903",
    "1867", "warsaw", "london", "big", "small", "old", "new", "first", "last", "king", "queen",
    "war", "peace", "not", "never", "always", "blue", "red", "green", "mountain", "sea", "ocean",
    "flows", "into", "north", "south", "east", "west",
]
HEAD_LABELS = list(NLI_HEAD_LABELS)


def random_texts(n: int, seed: int, min_words: int = 2, max_words: int = 40) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(min_words, max_words))) for _ in range(n)]


def random_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    firsts, seconds = random_texts(n, seed, 5, 40), random_texts(n, seed + 1, 2, 15)
    return list(zip(firsts, seconds, strict=True))


def settings_for(tmp: Path) -> RuntimeSettings:
    return RuntimeSettings(provider="cpu", models_dir=tmp / "cache", max_batch=8, max_wait_ms=1.0)


def _torch_inputs(directory: Path, texts: list, pairs: bool = False) -> dict[str, object]:
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(str(directory))
    if pairs:
        return tok([a for a, _ in texts], [b for _, b in texts], padding=True, truncation=True,
                   max_length=64, return_tensors="pt")
    return tok(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")


def _raw_logits(directory: Path, pairs: list[tuple[str, str]]) -> np.ndarray:
    from middleware.runtime.onnx_session import OnnxSession
    from middleware.runtime.tokenizer import TextTokenizer

    manifest = read_manifest(directory)
    tok = TextTokenizer(directory / "tokenizer.json", manifest.max_length, manifest.inputs["model"])
    session = OnnxSession(directory / "model.onnx", RuntimeSettings(provider="cpu"))
    return session.run(tok.collate(tok.encode_pairs(pairs)))[0]
