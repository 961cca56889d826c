"""Test doubles for the evidence tests (no tests here): a deterministic hashed bag-of-words
embedder, a rule-based relevance cross-encoder, and a tiny corpus writer."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class HashEmbedder:
    """Hashed bag of tokens, L2-normalised: texts sharing tokens are close, deterministic.
    Records each call's texts (``calls``; ``embedded`` flattens them) so tests can check that
    only changed passages are embedded again, and how calls were batched."""

    def __init__(self, dim: int = 64, name: str = "hash-bow", tokens: Callable[[str], Iterable[str]] = words) -> None:
        self.dim = dim
        self.name = name
        self.tokens = tokens
        self.calls: list[list[str]] = []

    @property
    def embedded(self) -> list[str]:
        return [text for call in self.calls for text in call]

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in self.tokens(text):
                bucket = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=4).digest(), "little")
                out[row, bucket % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_sync(texts)


class FailingEmbedder(HashEmbedder):
    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("embedding service down")


class KeywordScorer:
    """A relevance cross-encoder double: the share of the question's words in the passage."""

    labels = ["relevance"]

    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []

    async def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.pairs.extend(pairs)
        out = []
        for question, passage in pairs:
            words = set(_WORD.findall(question.lower()))
            found = set(_WORD.findall(passage.lower()))
            out.append([len(words & found) / max(len(words), 1)])
        return np.asarray(out, dtype=np.float32)


MARKDOWN = """# Kelvin scale

The kelvin is the base unit of temperature in the International System of Units. Absolute zero is 0 kelvin.
It equals minus 273.15 degrees Celsius. The scale is named after Lord Kelvin. He proposed it in 1848.

## Uses

Physicists measure very cold gases in kelvin. Astronomers give the temperature of stars in kelvin too.
"""

TEXT = """The Danube flows through ten countries. It rises in the Black Forest of Germany.
The river empties into the Black Sea through a large delta in Romania."""

HTML = """<html><head><title>Mount Fuji facts</title></head><body>
<nav>Home | About | Contact</nav>
<article><h1>Mount Fuji</h1>
<p>Mount Fuji is the highest mountain in Japan, rising to 3,776 metres. It is an active stratovolcano
that last erupted in 1707. The mountain stands on the island of Honshu, southwest of Tokyo.</p>
<p>Climbers usually ascend Mount Fuji in July and August, when the trails are open to the public.</p>
</article><footer>Copyright 2024 Example Travel</footer></body></html>"""

JSONL_RECORDS = [
    {"text": "The Nile is about 6,650 kilometres long. It flows north into the Mediterranean Sea.",
     "title": "Nile", "url": "https://example.org/nile"},
    {"text": "Lake Baikal in Siberia is the deepest lake in the world, at 1,642 metres.", "title": "Lake Baikal"},
]


def write_corpus(root: Path) -> Path:
    """A tiny mixed corpus: markdown in a subfolder, text, HTML and JSON lines."""
    (root / "notes").mkdir(parents=True, exist_ok=True)
    (root / "notes" / "kelvin.md").write_text(MARKDOWN, encoding="utf-8")
    (root / "danube.txt").write_text(TEXT, encoding="utf-8")
    (root / "fuji.html").write_text(HTML, encoding="utf-8")
    (root / "rivers.jsonl").write_text("\n".join(json.dumps(r) for r in JSONL_RECORDS) + "\n", encoding="utf-8")
    return root
