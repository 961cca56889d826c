"""The dense half of the local index: passage embeddings in ``.npy`` files next to the SQLite
database, one row per passage rowid, rows in rowid order.

Files are per index generation (``vectors-<gen>.npy`` float16, ``ids-<gen>.npy`` int64): a
writer writes generation g+1, commits g+1 in SQLite, then removes older files, so a reader
always pairs rows with the passages of the generation it read. Large sets stay memory-mapped
float16 (100k x 384 is 77 MB) behind binary codes; small ones are loaded as float32.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from middleware.interfaces import Embedder

log = logging.getLogger(__name__)

_PREFIXES = ("vectors", "ids")


def embedder_fingerprint(embedder: Embedder) -> str:
    """Names the embedding space: vectors from different fingerprints are not comparable."""
    return f"{getattr(embedder, 'name', None) or type(embedder).__qualname__}:{embedder.dim}"


EXACT_ROWS = 20_000
"""Up to this many rows a query scans every row (float32); past it, binary codes first."""
RESCORE_FACTOR = 20
RESCORE_MIN = 500
_CHUNK = 16_384


@dataclass
class Vectors:
    """The vectors of one generation; ``matrix`` is None when the index has none usable.

    Small sets are searched exactly. A large one is searched in two steps, because one exact
    pass over 100k x 384 float32 rows is memory-bound (40 ms on this machine under load):
    Hamming distance between sign bits of the mean-centred vectors (48 bytes a row, numpy
    popcount) picks ``max(20 n, 500)`` candidates, whose float rows are then scored exactly.
    """

    generation: int
    fingerprint: str
    ids: np.ndarray | None = None
    matrix: np.ndarray | None = None
    """float16 rows (memory-mapped) or float32 (small sets, loaded)."""
    exact_rows: int = EXACT_ROWS
    _codes: np.ndarray | None = field(default=None, repr=False)
    _mean: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.matrix is None:
            return
        if len(self.matrix) <= self.exact_rows:
            self.matrix = np.asarray(self.matrix, dtype=np.float32)
        else:
            self._mean = _column_mean(self.matrix)
            codes = [_sign_codes(self.matrix[i : i + _CHUNK], self._mean) for i in range(0, len(self.matrix), _CHUNK)]
            self._codes = np.ascontiguousarray(np.concatenate(codes).T)  # word-major: fast popcount sums

    def nearest(self, vector: np.ndarray, n: int) -> list[int]:
        """Rowids of the ``n`` rows nearest to ``vector`` by cosine (rows are normalised)."""
        if self.matrix is None or self.ids is None or not len(self.ids) or n <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self._codes is None:
            rows = np.arange(len(self.matrix))
            scores = self.matrix @ query
        else:
            rows = self._candidates(query, max(RESCORE_FACTOR * n, RESCORE_MIN))
            scores = np.asarray(self.matrix[rows], dtype=np.float32) @ query
        top = _top(scores, n)
        return self.ids[rows[top]].tolist()

    def _candidates(self, query: np.ndarray, m: int) -> np.ndarray:
        assert self._codes is not None and self._mean is not None
        code = _sign_codes(query[None, :], self._mean)[0]
        distance = np.bitwise_count(self._codes[0] ^ code[0]).astype(np.int32)
        for word, bits in zip(self._codes[1:], code[1:], strict=True):
            distance += np.bitwise_count(word ^ bits)
        if m >= len(distance):
            return np.arange(len(distance))
        # The m nearest by a histogram of the few distinct distances (0..bits): much faster
        # than a partition over 100k values with heavy ties. Ties at the cut are all kept.
        cut = int(np.searchsorted(np.cumsum(np.bincount(distance)), m))
        return np.flatnonzero(distance <= cut)


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


def _sign_codes(rows: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Sign bits of the centred rows, packed; as uint64 words when the width allows."""
    bits = np.packbits(np.asarray(rows, dtype=np.float32) > mean, axis=1)
    return bits.view(np.uint64) if bits.shape[1] % 8 == 0 else bits


def save_vectors(directory: Path, generation: int, ids: np.ndarray, matrix: np.ndarray) -> None:
    np.save(directory / f"ids-{generation}.npy", ids.astype(np.int64, copy=False))
    np.save(directory / f"vectors-{generation}.npy", matrix.astype(np.float16))


def load_vectors(directory: Path, generation: int, fingerprint: str) -> Vectors | None:
    """The vector files of ``generation`` as float32, or None if missing or inconsistent."""
    try:
        ids = np.load(directory / f"ids-{generation}.npy")
        matrix = np.load(directory / f"vectors-{generation}.npy", mmap_mode="r")
    except (OSError, ValueError):
        return None
    if matrix.ndim != 2 or ids.ndim != 1 or len(ids) != len(matrix):
        log.warning("vector files of %s generation %d disagree; they will be rebuilt", directory, generation)
        return None
    return Vectors(generation, fingerprint, ids, matrix)


def remove_vector_files(directory: Path, keep: int | None = None, only: int | None = None) -> None:
    """Delete the vector files of every generation but ``keep`` (or only of ``only``)."""
    for path in directory.glob("*-*.npy"):
        prefix, _, gen = path.stem.rpartition("-")
        if prefix not in _PREFIXES or not gen.isdigit() or int(gen) == keep:
            continue
        if only is not None and int(gen) != only:
            continue
        with contextlib.suppress(OSError):
            path.unlink()
