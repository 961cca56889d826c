"""The local index: passages of the user's documents, persistent in one directory.

- ``index.sqlite``: a ``documents`` table (path, mtime, size, sha256: what makes re-indexing
  incremental), a ``passages`` table, and an FTS5 table over the passages' title and text
  (porter stemmer over unicode61, BM25 ranking). WAL mode, so a running server keeps reading
  while ``factcheck index`` writes.
- ``vectors-<gen>.npy`` and ``ids-<gen>.npy``: the passages' embeddings (:mod:`.vectors`).
- ``portrait.bloom``/``portrait.json``: the QUIP Data Portrait (:mod:`.portrait`).

A query is answered by BM25 and by cosine similarity, each giving its top candidates, fused
by reciprocal rank fusion (Cormack et al., 2009; k=60).
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from middleware.evidence.fts import LexicalSearch
from middleware.evidence.documents import Document, JsonlFields, UnreadableFile, find_files, parse_documents
from middleware.evidence.passages import STRIDE, WINDOW, embedding_text, document_passages
from middleware.evidence.portrait import DataPortrait, covered_regions
from middleware.evidence.vectors import (
    Vectors,
    embedder_fingerprint,
    load_vectors,
    remove_vector_files,
    save_vectors,
)
from middleware.interfaces import Embedder
from middleware.settings import EvidenceSettings, Settings
from middleware.types import Passage

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
DB_FILE = "index.sqlite"
RRF_K = 60
CANDIDATES = 50
SEARCHES_CACHED = 4096
"""Search results an index keeps (per query and k, for the committed generation)."""
DEMO_CORPUS = Path(__file__).resolve().parent / "demo_corpus"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL, sha256 TEXT NOT NULL, passages INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS passages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, doc_id INTEGER NOT NULL, pid TEXT NOT NULL,
    source TEXT NOT NULL, url TEXT, title TEXT, start_char INTEGER NOT NULL,
    end_char INTEGER NOT NULL, text TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS passages_doc ON passages(doc_id);
CREATE VIRTUAL TABLE IF NOT EXISTS passages_fts USING fts5(
    title, text, content='passages', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER IF NOT EXISTS passages_ai AFTER INSERT ON passages BEGIN
    INSERT INTO passages_fts(rowid, title, text) VALUES (new.id, new.title, new.text);
END;
CREATE TRIGGER IF NOT EXISTS passages_ad AFTER DELETE ON passages BEGIN
    INSERT INTO passages_fts(passages_fts, rowid, title, text) VALUES ('delete', old.id, old.title, old.text);
END;
"""
_PASSAGE_COLUMNS = "id, pid, source, url, title, start_char, end_char, text"


@runtime_checkable
class IndexEmbedder(Embedder, Protocol):
    """An embedder that also embeds in bulk without the event loop (for indexing)."""

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray: ...


class IndexFormatError(RuntimeError):
    """The directory holds an index of another format version."""


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[tuple[int, float]]:
    """Fuse ranked id lists: score(id) = sum over lists of 1 / (k + rank), rank from 1.
    Returns (id, score), best first; ties keep first-seen order."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: kv[1], reverse=True)


@dataclass
class IndexStats:
    """What one ``LocalIndex.update`` did. Files: added, updated, unchanged, removed, skipped."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: list[str] = field(default_factory=list)
    """``'path: reason'`` of each file that could not be indexed."""
    passages_added: int = 0
    passages_removed: int = 0
    passages_total: int = 0
    embedded: int = 0
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return bool(self.passages_added or self.passages_removed or self.added or self.updated or self.removed)


@dataclass
class _Pending:
    """Passages inserted by an update, waiting for their embeddings."""

    ids: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    removed_ids: list[int] = field(default_factory=list)


Progress = Callable[[str, int, int], None]
"""progress(stage, done, total): stage is 'read' (files) or 'embed' (passages)."""


class LocalIndex:
    """A persistent passage index in ``directory`` (created if missing).

    ``embedder`` gives the dense half; without one the index is BM25 only (and an update
    drops stored vectors). Reads are thread-safe (one SQLite connection per thread); updates
    are serialised by SQLite's write lock."""

    def __init__(
        self,
        directory: Path,
        embedder: IndexEmbedder | None = None,
        *,
        window: int = WINDOW,
        stride: int = STRIDE,
        rrf_k: int = RRF_K,
        candidates: int = CANDIDATES,
        portrait: bool = True,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder
        self.window, self.stride = window, stride
        self.rrf_k, self.candidates = rrf_k, candidates
        self.build_portrait = portrait
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._vectors: Vectors | None = None
        self._warned_fingerprint = False
        self._lexical = LexicalSearch()
        self._results: OrderedDict[tuple[int, str, str, int, bool], list[Passage]] = OrderedDict()
        self._create()

    @classmethod
    def from_settings(
        cls, directory: Path, embedder: IndexEmbedder | None, settings: EvidenceSettings, **kwargs: object
    ) -> LocalIndex:
        return cls(
            directory,
            embedder,
            window=settings.passage_sentences,
            stride=settings.passage_stride,
            rrf_k=settings.rrf_k,
            candidates=settings.index_candidates,
            **kwargs,  # type: ignore[arg-type]
        )

    @staticmethod
    def exists(directory: Path) -> bool:
        return (Path(directory) / DB_FILE).is_file()

    # -- reading -------------------------------------------------------------------------

    def search(self, query: str, k: int = 5, vector: np.ndarray | None = None) -> list[Passage]:
        """Top ``k`` passages for ``query`` (provider 'index', score = fused RRF score).
        ``vector`` is the query's embedding when the caller already has it. Results are kept
        per committed generation (:data:`SEARCHES_CACHED`): the verification questions of one
        subject recur from claim to claim ('When was the Eiffel Tower completed?')."""
        if k <= 0:
            return []
        vectors = self._current_vectors()  # reads the committed generation: the lexical search uses it too
        dense = vectors.matrix is not None and self.embedder is not None
        key = (vectors.generation, vectors.fingerprint, query, k, dense)
        with self._lock:
            hit = self._results.get(key)
            if hit is not None:
                self._results.move_to_end(key)
                return list(hit)
        n = max(self.candidates, k)
        rankings = [self._lexical.search(self._db(), vectors.generation, query, n)]
        if dense:
            if vector is None:
                vector = self.embedder.embed_sync([query])[0]
            rankings.append(vectors.nearest(vector, n))
        fused = reciprocal_rank_fusion(rankings, self.rrf_k)[:k]
        found = self.passages([i for i, _ in fused], [s for _, s in fused])
        with self._lock:
            self._results[key] = found
            while len(self._results) > SEARCHES_CACHED:
                self._results.popitem(last=False)
        return list(found)

    def lexical(self, query: str, n: int) -> list[int]:
        """Rowids of the ``n`` best BM25 matches (cost-bounded: see :mod:`.fts`)."""
        return self._lexical.search(self._db(), self.generation, query, n)

    def dense(self, vector: np.ndarray, n: int) -> list[int]:
        """Rowids of the ``n`` passages nearest to ``vector`` by cosine."""
        return self._current_vectors().nearest(vector, n)

    def passages(self, rowids: Sequence[int], scores: Sequence[float] | None = None) -> list[Passage]:
        """The passages with these rowids, in this order (missing rowids are left out)."""
        if not rowids:
            return []
        marks = ",".join("?" * len(rowids))
        rows = self._db().execute(f"SELECT {_PASSAGE_COLUMNS} FROM passages WHERE id IN ({marks})", list(rowids))
        by_id = {r[0]: r for r in rows}
        out = []
        for i, rowid in enumerate(rowids):
            row = by_id.get(rowid)
            if row is not None:
                out.append(_passage(row, scores[i] if scores is not None else 0.0))
        return out

    @property
    def dense_ready(self) -> bool:
        """True when queries also go through the vectors (stored with this embedder)."""
        return self.embedder is not None and self._current_vectors().matrix is not None

    def __len__(self) -> int:
        return self._db().execute("SELECT count(*) FROM passages").fetchone()[0]

    def documents(self) -> list[str]:
        """Paths of the indexed files."""
        return [r[0] for r in self._db().execute("SELECT path FROM documents ORDER BY path")]

    @property
    def embedded_with(self) -> str:
        """Fingerprint of the embedder the stored vectors came from ('' when none)."""
        return self._meta(self._db(), "embedder", "")

    @property
    def generation(self) -> int:
        return int(self._meta(self._db(), "generation", "0"))

    # -- writing -------------------------------------------------------------------------

    def update(
        self, paths: Sequence[Path], fields: JsonlFields = JsonlFields(), progress: Progress | None = None
    ) -> IndexStats:
        """Bring the index in line with the files under ``paths``: new and changed files are
        (re-)split and embedded, unchanged ones (same mtime and size, or same sha256) kept,
        and indexed files under ``paths`` that are gone or unreadable now are removed. A new
        window or stride setting splits every given file again."""
        t0 = time.perf_counter()
        roots = [Path(p).resolve() for p in paths]
        for root in roots:
            if not root.exists():
                log.warning("%s does not exist: its indexed files, if any, are removed", root)
        files = find_files(roots)
        stats = IndexStats()
        pending = _Pending()
        db = self._connect()
        old_generation = -1
        try:
            db.execute("BEGIN IMMEDIATE")
            old_generation = int(self._meta(db, "generation", "0"))
            known = {r[1]: r for r in db.execute("SELECT id, path, mtime_ns, size, sha256 FROM documents")}
            split = f"{self.window}/{self.stride}"
            resplit = self._meta(db, "split", split) != split  # other window settings: split all again
            self._set_meta(db, "split", split)
            for done, path in enumerate(files, start=1):
                self._ingest(db, path, known.get(str(path)), fields, stats, pending, resplit)
                if progress:
                    progress("read", done, len(files))
            seen = {str(p) for p in files}
            for path, row in known.items():
                if path not in seen and _under(path, roots) and self._forget(db, row[0], pending):
                    stats.removed += 1
            stats.passages_removed = len(pending.removed_ids)
            vectors_changed = self._update_vectors(db, old_generation, pending, stats, progress)
            generation = old_generation + 1 if (stats.changed or vectors_changed) else old_generation
            self._set_meta(db, "generation", str(generation))
            db.commit()
        except BaseException:
            db.rollback()
            if old_generation >= 0:
                remove_vector_files(self.directory, only=old_generation + 1)
            raise
        finally:
            db.close()
        remove_vector_files(self.directory, keep=generation)
        if self.build_portrait:
            self._update_portrait(old_generation, generation, pending)
        stats.passages_total = len(self)
        stats.seconds = time.perf_counter() - t0
        return stats

    def _ingest(
        self,
        db: sqlite3.Connection,
        path: Path,
        row: tuple | None,
        fields: JsonlFields,
        stats: IndexStats,
        pending: _Pending,
        resplit: bool = False,
    ) -> None:
        try:
            st = path.stat()
            if not resplit and row is not None and row[2] == st.st_mtime_ns and row[3] == st.st_size:
                stats.unchanged += 1
                return
            data = path.read_bytes()
            sha = hashlib.sha256(data).hexdigest()
            if not resplit and row is not None and row[4] == sha:
                db.execute("UPDATE documents SET mtime_ns=?, size=? WHERE id=?", (st.st_mtime_ns, st.st_size, row[0]))
                stats.unchanged += 1
                return
            documents = parse_documents(path, data, fields)
        except (OSError, UnreadableFile) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            log.warning("skipping %s: %s", path, reason)
            stats.skipped.append(f"{path}: {reason}")
            if row is not None:
                self._forget(db, row[0], pending)
            return
        passages = [p for d in documents for p in self._split(d, path)]
        if row is None:
            doc_id = db.execute(
                "INSERT INTO documents(path, mtime_ns, size, sha256, passages) VALUES (?,?,?,?,?)",
                (str(path), st.st_mtime_ns, st.st_size, sha, len(passages)),
            ).lastrowid
            stats.added += 1
        else:
            doc_id = row[0]
            self._delete_passages(db, doc_id, pending)
            db.execute(
                "UPDATE documents SET mtime_ns=?, size=?, sha256=?, passages=? WHERE id=?",
                (st.st_mtime_ns, st.st_size, sha, len(passages), doc_id),
            )
            stats.updated += 1
        for p in passages:
            rowid = db.execute(
                "INSERT INTO passages(doc_id, pid, source, url, title, start_char, end_char, text) "
                "VALUES (?,?,?,?,?,?,?,?)",
                (doc_id, p.id, p.source, p.url, p.title, p.start, p.end, p.text),
            ).lastrowid
            pending.ids.append(rowid)
            pending.texts.append(embedding_text(p))
            pending.passages.append(p)
        stats.passages_added += len(passages)

    def _split(self, document: Document, path: Path) -> list[Passage]:
        return document_passages(
            document.text,
            document.source,
            document.title,
            self.window,
            self.stride,
            url=document.url,
            default_title=path.stem,
        )

    def _forget(self, db: sqlite3.Connection, doc_id: int, pending: _Pending) -> bool:
        self._delete_passages(db, doc_id, pending)
        return db.execute("DELETE FROM documents WHERE id=?", (doc_id,)).rowcount > 0

    @staticmethod
    def _delete_passages(db: sqlite3.Connection, doc_id: int, pending: _Pending) -> None:
        pending.removed_ids.extend(r[0] for r in db.execute("SELECT id FROM passages WHERE doc_id=?", (doc_id,)))
        db.execute("DELETE FROM passages WHERE doc_id=?", (doc_id,))

    def _update_vectors(
        self,
        db: sqlite3.Connection,
        old_generation: int,
        pending: _Pending,
        stats: IndexStats,
        progress: Progress | None,
    ) -> bool:
        """Write the next generation's vector files if anything changed; return whether the
        vectors changed. Rows of unchanged passages are carried over; a new embedder (or a
        damaged vector file) means every passage is embedded again."""
        stored = self._meta(db, "embedder", "")
        if self.embedder is None:
            self._set_meta(db, "embedder", "")
            return bool(stored)
        fingerprint = embedder_fingerprint(self.embedder)
        old = load_vectors(self.directory, old_generation, stored) if stored == fingerprint else None
        removed = np.asarray(pending.removed_ids, dtype=np.int64)
        carried = old is not None and old.ids is not None and len(old.ids) == _count_before(db, pending)
        if carried and not pending.ids and not len(removed):
            return False
        if carried:
            keep = ~np.isin(old.ids, removed)
            ids = np.concatenate([old.ids[keep], np.asarray(pending.ids, dtype=np.int64)])
            matrix = np.concatenate([old.matrix[keep], self._embed(pending.texts, stats, progress)])
        else:
            rows = db.execute("SELECT id, title, text FROM passages ORDER BY id").fetchall()
            texts = [embedding_text(_text_passage(title, text)) for _, title, text in rows]
            ids = np.asarray([r[0] for r in rows], dtype=np.int64)
            matrix = self._embed(texts, stats, progress)
        save_vectors(self.directory, old_generation + 1, ids, matrix)
        self._set_meta(db, "embedder", fingerprint)
        return True

    def _embed(self, texts: list[str], stats: IndexStats, progress: Progress | None) -> np.ndarray:
        assert self.embedder is not None
        dim = self.embedder.dim
        out = np.zeros((len(texts), dim), dtype=np.float32)
        step = 256
        for start in range(0, len(texts), step):
            out[start : start + step] = self.embedder.embed_sync(texts[start : start + step])
            if progress:
                progress("embed", min(start + step, len(texts)), len(texts))
        stats.embedded += len(texts)
        return out

    def _update_portrait(self, old_generation: int, generation: int, pending: _Pending) -> None:
        """Add new documents' n-grams when nothing was removed; otherwise rebuild."""
        portrait = DataPortrait.load(self.directory)
        if portrait is not None and portrait.generation == generation:
            return
        if portrait is not None and portrait.generation == old_generation and not pending.removed_ids:
            portrait.add_texts(covered_regions(pending.passages))
        else:
            portrait = self._rebuild_portrait()
        portrait.generation = generation
        portrait.save(self.directory)

    def _rebuild_portrait(self) -> DataPortrait:
        db = self._db()
        chars = db.execute("SELECT coalesce(sum(length(text)), 0) FROM passages").fetchone()[0]
        portrait = DataPortrait(capacity=chars * min(self.stride, self.window) // self.window)
        rows = db.execute(
            f"SELECT {_PASSAGE_COLUMNS} FROM passages ORDER BY doc_id, source, start_char, end_char"
        )
        portrait.add_texts(covered_regions(_passage(r, 0.0) for r in rows))
        return portrait

    # -- storage -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.directory / DB_FILE, timeout=60.0, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA busy_timeout=60000")
        return db

    def _db(self) -> sqlite3.Connection:
        """This thread's reading connection."""
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = self._connect()
            with self._lock:
                self._connections.append(db)
        return db

    def _create(self) -> None:
        db = self._connect()
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            version = self._meta(db, "schema", "")
        finally:
            db.close()
        if version != str(SCHEMA_VERSION):
            raise IndexFormatError(
                f"{self.directory} holds an index of format {version}, this version reads {SCHEMA_VERSION}: "
                "delete the directory and index again"
            )

    @staticmethod
    def _meta(db: sqlite3.Connection, key: str, default: str) -> str:
        row = db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    @staticmethod
    def _set_meta(db: sqlite3.Connection, key: str, value: str) -> None:
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def _current_vectors(self) -> Vectors:
        """The vectors of the committed generation, reloaded when another writer moved it on."""
        meta = dict(self._db().execute("SELECT key, value FROM meta WHERE key IN ('generation', 'embedder')"))
        generation, stored = int(meta.get("generation", "0")), meta.get("embedder", "")
        vectors = self._vectors
        if vectors is not None and vectors.generation == generation and vectors.fingerprint == stored:
            return vectors
        with self._lock:
            usable = self.embedder is not None and stored == embedder_fingerprint(self.embedder)
            if stored and self.embedder is not None and not usable and not self._warned_fingerprint:
                log.warning(
                    "index %s was embedded with %s, not %s: BM25 only until it is indexed again",
                    self.directory, stored, embedder_fingerprint(self.embedder),
                )
                self._warned_fingerprint = True
            loaded = load_vectors(self.directory, generation, stored) if usable else None
            self._vectors = loaded or Vectors(generation, stored)
            return self._vectors

    def close(self) -> None:
        with self._lock:
            for db in self._connections:
                db.close()
            self._connections.clear()
        self._local = threading.local()

    def __enter__(self) -> LocalIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def prepare_demo_index(settings: Settings) -> None:
    """``ensure_demo_index`` for ``settings`` when the local index is one of its evidence
    providers (the command line's pipeline and ``factcheck serve`` call it before checking)."""
    if "index" in settings.evidence.providers:
        ensure_demo_index(settings.evidence.index_dir, settings=settings)


def ensure_demo_index(
    index_dir: Path, embedder: IndexEmbedder | None = None, settings: Settings | None = None
) -> Path:
    """Index the packaged demo corpus into ``index_dir`` when the index is missing, empty or
    out of date with the corpus; leave an index that holds other documents alone. The
    embedder is only loaded (``middleware.runtime.load_embedder``) when work is needed."""
    from middleware.settings import load_settings

    settings = settings or load_settings()
    index_dir = Path(index_dir)
    if LocalIndex.exists(index_dir):
        with LocalIndex(index_dir, portrait=False) as probe:
            if _holds_other_documents(probe) or _demo_is_fresh(probe):
                return index_dir
    if embedder is None:
        from middleware.runtime import load_embedder

        embedder = load_embedder(settings.runtime)
    with LocalIndex.from_settings(index_dir, embedder, settings.evidence) as index:
        stats = index.update([DEMO_CORPUS])
    log.info(
        "demo index %s: %d files indexed, %d passages (%.1f s)",
        index_dir, stats.added + stats.updated, stats.passages_total, stats.seconds,
    )
    return index_dir


def _holds_other_documents(index: LocalIndex) -> bool:
    return any(not _under(path, [DEMO_CORPUS]) for path in index.documents())


def _demo_is_fresh(index: LocalIndex) -> bool:
    """Same demo files with the same mtime and size, vectors stored, portrait current."""
    db = index._db()
    indexed = {r[0]: (r[1], r[2]) for r in db.execute("SELECT path, mtime_ns, size FROM documents")}
    files = find_files([DEMO_CORPUS])
    if not files or len(files) != len(indexed) or not index._meta(db, "embedder", ""):
        return False
    for path in files:
        st = path.stat()
        if indexed.get(str(path)) != (st.st_mtime_ns, st.st_size):
            return False
    portrait = DataPortrait.load(index.directory)
    return portrait is not None and portrait.generation == index.generation


# -- helpers ----------------------------------------------------------------------------


def _passage(row: tuple, score: float) -> Passage:
    _, pid, source, url, title, start, end, text = row
    return Passage(
        id=pid, text=text, provider="index", source=source, title=title, url=url, start=start, end=end, score=score
    )


def _text_passage(title: str | None, text: str) -> Passage:
    return Passage(id="", text=text, provider="index", source="", title=title)


def _under(path: str, roots: Sequence[Path]) -> bool:
    p = Path(path)
    return any(p == root or root in p.parents for root in roots)


def _count_before(db: sqlite3.Connection, pending: _Pending) -> int:
    """Passages the index held before this update (now minus added plus removed)."""
    now = db.execute("SELECT count(*) FROM passages").fetchone()[0]
    return now - len(pending.ids) + len(pending.removed_ids)
