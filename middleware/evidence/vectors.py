"""The dense half of the local index: passage embeddings in ``.npy`` files next to the SQLite
database, one row per passage rowid, rows in rowid order.

Files are per index generation (``vectors-<gen>.npy`` float16, ``ids-<gen>.npy`` int64, and
for large sets ``codes-<gen>.npz``): a writer writes generation g+1, commits g+1 in SQLite,
then removes older files, so a reader always pairs rows with the passages of the generation
it read.

Small sets are loaded as float32 and searched exactly. One exact pass over 100k x 384
float32 rows is memory-bound (15-40 ms on this 2-core machine), so a large set stays
memory-mapped float16 behind binary codes (SimHash): the sign bits of the mean-centred
vectors, plus the signs of as many fixed random hyperplanes (96 bytes a row). Hamming
distance (numpy popcount) picks ``max(20 n, 500)`` candidates, whose float rows are then
scored exactly. Recall against an exact scan is printed by ``load_tests.bench_index``.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from middleware.interfaces import Embedder

log = logging.getLogger(__name__)

EXACT_ROWS = 20_000
"""Up to this many rows a query scans every row; past it, binary codes pick candidates."""
RESCORE_FACTOR = 20
RESCORE_MIN = 500
_CHUNK = 16_384
_PREFIXES = ("vectors", "ids", "codes")


def embedder_fingerprint(embedder: Embedder) -> str:
    """Names the embedding space: vectors from different fingerprints are not comparable."""
    return f"{getattr(embedder, 'name', None) or type(embedder).__qualname__}:{embedder.dim}"


@dataclass
class BinaryCodes:
    """Packed sign bits of every row (word-major: ``codes[w]`` is word ``w`` of all rows)."""

    centre: np.ndarray
    codes: np.ndarray

    @classmethod
    def encode(cls, matrix: np.ndarray) -> BinaryCodes:
        centre = _column_mean(matrix)
        chunks = [_sign_bits(matrix[i : i + _CHUNK], centre) for i in range(0, len(matrix), _CHUNK)]
        return cls(centre, np.ascontiguousarray(np.concatenate(chunks).T))

    def nearest_rows(self, query: np.ndarray, m: int) -> np.ndarray:
        """Indices of (at least) the ``m`` rows nearest to ``query`` in Hamming distance."""
        code = _sign_bits(query[None, :], self.centre)[0]
        distance = np.bitwise_count(self.codes[0] ^ code[0]).astype(np.int32)
        for word, bits in zip(self.codes[1:], code[1:], strict=True):
            distance += np.bitwise_count(word ^ bits)
        if m >= len(distance):
            return np.arange(len(distance))
        # A histogram of the few distinct distances finds the cut much faster than a
        # partition of 100k values with heavy ties; ties at the cut are all kept.
        cut = int(np.searchsorted(np.cumsum(np.bincount(distance)), m))
        return np.flatnonzero(distance <= cut)


@dataclass
class Vectors:
    """The vectors of one generation; ``matrix`` is None when the index has none usable."""

    generation: int
    fingerprint: str
    ids: np.ndarray | None = None
    matrix: np.ndarray | None = None
    """float32 rows (small sets) or memory-mapped float16 rows behind ``codes``."""
    codes: BinaryCodes | None = None
    exact_rows: int = EXACT_ROWS

    def __post_init__(self) -> None:
        if self.matrix is None:
            return
        if len(self.matrix) <= self.exact_rows:
            self.matrix = np.asarray(self.matrix, dtype=np.float32)
            self.codes = None
        elif self.codes is None:
            self.codes = BinaryCodes.encode(self.matrix)

    def nearest(self, vector: np.ndarray, n: int) -> list[int]:
        """Rowids of the ``n`` rows nearest to ``vector`` by cosine (rows are normalised)."""
        if self.matrix is None or self.ids is None or not len(self.ids) or n <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self.codes is None:
            rows = np.arange(len(self.matrix))
            scores = self.matrix @ query
        else:
            rows = self.codes.nearest_rows(query, max(RESCORE_FACTOR * n, RESCORE_MIN))
            scores = np.asarray(self.matrix[rows], dtype=np.float32) @ query
        top = _top(scores, n)
        return self.ids[rows[top]].tolist()


def _top(scores: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` highest scores, best first (ties: lower index first)."""
    if n < len(scores):
        top = np.argpartition(-scores, n - 1)[:n]
        return top[np.lexsort((top, -scores[top]))]
    return np.argsort(-scores, kind="stable")


def _column_mean(matrix: np.ndarray) -> np.ndarray:
    total = np.zeros(matrix.shape[1], dtype=np.float64)
    for i in range(0, len(matrix), _CHUNK):
        total += np.asarray(matrix[i : i + _CHUNK], dtype=np.float32).sum(axis=0)
    return (total / max(len(matrix), 1)).astype(np.float32)


@lru_cache(maxsize=4)
def _hyperplanes(dim: int) -> np.ndarray:
    """Fixed random hyperplanes (seeded: the same in every process)."""
    return np.random.default_rng(20240601).standard_normal((dim, dim)).astype(np.float32)


def _sign_bits(rows: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Signs of the centred rows and of their projections, packed into uint64 words (bytes
    when the width is not a multiple of 64 bits)."""
    centred = np.asarray(rows, dtype=np.float32) - centre
    bits = np.packbits(np.hstack([centred > 0, centred @ _hyperplanes(centred.shape[1]) > 0]), axis=1)
    return bits.view(np.uint64) if bits.shape[1] % 8 == 0 else bits


def save_vectors(
    directory: Path, generation: int, ids: np.ndarray, matrix: np.ndarray, exact_rows: int = EXACT_ROWS
) -> None:
    """Write a generation's files; the binary codes too when the set is large."""
    half = matrix.astype(np.float16)
    np.save(directory / f"ids-{generation}.npy", ids.astype(np.int64, copy=False))
    np.save(directory / f"vectors-{generation}.npy", half)
    if len(ids) > exact_rows:
        codes = BinaryCodes.encode(half)
        np.savez(directory / f"codes-{generation}.npz", centre=codes.centre, codes=codes.codes)


def load_vectors(
    directory: Path, generation: int, fingerprint: str, exact_rows: int = EXACT_ROWS
) -> Vectors | None:
    """The vectors of ``generation``, or None if their files are missing or inconsistent.
    Codes missing from disk are computed."""
    try:
        ids = np.load(directory / f"ids-{generation}.npy")
        matrix = np.load(directory / f"vectors-{generation}.npy", mmap_mode="r")
    except (OSError, ValueError):
        return None
    if matrix.ndim != 2 or ids.ndim != 1 or len(ids) != len(matrix):
        log.warning("vector files of %s generation %d disagree; they will be rebuilt", directory, generation)
        return None
    return Vectors(generation, fingerprint, ids, matrix, _load_codes(directory, generation, len(ids)), exact_rows)


def _load_codes(directory: Path, generation: int, rows: int) -> BinaryCodes | None:
    try:
        with np.load(directory / f"codes-{generation}.npz") as saved:
            codes = BinaryCodes(saved["centre"], saved["codes"])
    except (OSError, ValueError, KeyError):
        return None
    return codes if codes.codes.ndim == 2 and codes.codes.shape[1] == rows else None


def remove_vector_files(directory: Path, keep: int | None = None, only: int | None = None) -> None:
    """Delete the vector files of every generation but ``keep`` (or only of ``only``)."""
    for path in [*directory.glob("*-*.npy"), *directory.glob("*-*.npz")]:
        prefix, _, gen = path.stem.rpartition("-")
        if prefix not in _PREFIXES or not gen.isdigit() or int(gen) == keep:
            continue
        if only is not None and int(gen) != only:
            continue
        with contextlib.suppress(OSError):
            path.unlink()
