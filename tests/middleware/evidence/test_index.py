"""The local index: ingest of every file type, incremental re-index, deletions, bad files,
RRF fusion, persistence, the async source and the demo-index helper."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest

import middleware.evidence.index as index_module
from middleware.evidence.fts import LexicalSearch, query_terms
from middleware.evidence.documents import JsonlFields
from middleware.evidence.index import (
    LocalIndex,
    ensure_demo_index,
    reciprocal_rank_fusion,
)
from middleware.evidence.portrait import DataPortrait
from middleware.evidence.source import LocalIndexSource
from middleware.evidence.vectors import Vectors, load_vectors, remove_vector_files, save_vectors
from middleware.cache import MemoryCache
from middleware.evidence.relevance import RelevanceRanker
from middleware.metrics import STAGE_LATENCY
from tests.support.evidence_doubles import MARKDOWN, FailingEmbedder, HashEmbedder, write_corpus


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus")


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def index(tmp_path: Path, embedder: HashEmbedder) -> LocalIndex:
    with LocalIndex(tmp_path / "index", embedder) as local:
        yield local


def _sources(passages) -> set[str]:
    return {p.source for p in passages}


def _vector_rows(local: LocalIndex) -> int:
    files = sorted(local.directory.glob("vectors-*.npy"))
    assert len(files) == 1, files
    return len(np.load(files[0]))


def test_ingests_markdown_text_html_and_jsonl(index: LocalIndex, corpus: Path) -> None:
    stats = index.update([corpus])
    assert (stats.added, stats.skipped) == (4, [])
    assert stats.passages_total == len(index) == stats.embedded == _vector_rows(index)

    kelvin = index.search("Who named the kelvin scale", 3)
    assert kelvin[0].title == "Kelvin scale" and kelvin[0].provider == "index"
    assert kelvin[0].source == str(corpus / "notes" / "kelvin.md")
    assert MARKDOWN[kelvin[0].start : kelvin[0].end] == kelvin[0].text

    fuji = index.search("How high is Mount Fuji?", 1)[0]
    assert fuji.source == str(corpus / "fuji.html") and "3,776" in fuji.text
    assert fuji.title and "Fuji" in fuji.title
    assert "Copyright" not in fuji.text and "Contact" not in fuji.text

    nile = index.search("length of the Nile", 1)[0]
    assert (nile.title, nile.source, nile.url) == ("Nile", "https://example.org/nile", "https://example.org/nile")
    baikal = index.search("deepest lake", 1)[0]
    assert baikal.source == f"{corpus / 'rivers.jsonl'}#L2" and baikal.url is None

    danube = index.search("Danube Black Forest", 1)[0]
    assert danube.title == "danube" and danube.text.startswith("The Danube flows")


def test_jsonl_field_names_are_configurable(index: LocalIndex, tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"body": "Quartz is a hard mineral.", "name": "Quartz", "link": "https://q.example"}))
    index.update([path], JsonlFields(text="body", title="name", url="link"))
    (hit,) = index.search("quartz mineral", 5)
    assert (hit.title, hit.url) == ("Quartz", "https://q.example")


def test_reindex_is_incremental(index: LocalIndex, corpus: Path, embedder: HashEmbedder) -> None:
    first = index.update([corpus])
    embedder.calls.clear()
    again = index.update([corpus])
    assert (again.unchanged, again.embedded, again.changed) == (4, 0, False)
    assert embedder.embedded == []

    path = corpus / "danube.txt"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5_000_000_000))
    touched = index.update([corpus])
    assert (touched.unchanged, touched.embedded) == (4, 0)

    path.write_text("The Danube is the second-longest river in Europe. It flows into the Black Sea.")
    changed = index.update([corpus])
    assert (changed.updated, changed.unchanged, changed.embedded) == (1, 3, 1)
    assert embedder.embedded == ["The Danube is the second-longest river in Europe. It flows into the Black Sea."]
    assert changed.passages_total == first.passages_total
    assert _vector_rows(index) == len(index)
    assert "second-longest" in index.search("second-longest river in Europe", 1)[0].text
    assert not any("ten countries" in p.text for p in index.search("Danube ten countries", 10))


def test_files_gone_from_the_given_paths_are_removed(index: LocalIndex, corpus: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.txt"
    other.write_text("Basalt is a volcanic rock.")
    index.update([corpus, other])
    (corpus / "fuji.html").unlink()
    stats = index.update([corpus])  # other.txt is not under the given paths: kept
    assert stats.removed == 1
    assert str(corpus / "fuji.html") not in index.documents()
    assert str(other) in index.documents()
    assert all("Fuji" not in p.text for p in index.search("Mount Fuji Japan volcano", 10))
    assert _vector_rows(index) == len(index)
    other.unlink()
    assert index.update([other]).removed == 1
    assert str(other) not in index.documents()


def test_bad_files_are_skipped_with_a_warning_naming_them(
    index: LocalIndex, corpus: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (corpus / "latin1.txt").write_bytes("Caf\xe9 au lait".encode("latin-1"))
    (corpus / "binary.md").write_bytes(b"\x00\x01\x02binary")
    (corpus / "empty.html").write_text("<html><body></body></html>")
    (corpus / "mixed.jsonl").write_text('{"text": "Granite is an igneous rock."}\nnot json\n{"title": "no text"}\n[1, 2]\n')
    with caplog.at_level(logging.WARNING, logger="middleware.evidence"):
        stats = index.update([corpus])
    skipped = " ".join(stats.skipped)
    for name in ("latin1.txt", "binary.md", "empty.html"):
        assert name in skipped
        assert any(name in r.getMessage() for r in caplog.records)
    assert "mixed.jsonl" not in skipped
    assert sum("mixed.jsonl line" in r.getMessage() for r in caplog.records) == 3
    assert stats.added == 5
    assert index.search("granite igneous", 1)[0].text == "Granite is an igneous rock."


def test_a_file_that_became_unreadable_loses_its_passages(index: LocalIndex, corpus: Path) -> None:
    index.update([corpus])
    (corpus / "danube.txt").write_bytes(b"\xff\xfe broken")
    stats = index.update([corpus])
    assert len(stats.skipped) == 1
    assert str(corpus / "danube.txt") not in index.documents()
    assert not any(p.source.endswith("danube.txt") for p in index.search("Danube", 10))


def test_reciprocal_rank_fusion() -> None:
    fused = dict(reciprocal_rank_fusion([[1, 2, 3], [3, 1]], k=60))
    assert fused[1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[2] == pytest.approx(1 / 62)
    assert [i for i, _ in reciprocal_rank_fusion([[1, 2, 3], [3, 1]])] == [1, 3, 2]
    assert reciprocal_rank_fusion([]) == []


def test_search_fuses_bm25_and_dense_rankings(index: LocalIndex, corpus: Path, embedder: HashEmbedder) -> None:
    index.update([corpus])
    query = "temperature of stars"
    lexical = index.lexical(query, 50)
    dense = index.dense(embedder.embed_sync([query])[0], 50)
    assert lexical and dense and lexical != dense
    expected = reciprocal_rank_fusion([lexical, dense])[:3]
    hits = index.search(query, 3)
    assert [round(p.score, 9) for p in hits] == [round(s, 9) for _, s in expected]
    assert [p.id for p in hits] == [p.id for p in index.passages([i for i, _ in expected])]


def test_bm25_only_index_then_embedding_everything_later(tmp_path: Path, corpus: Path) -> None:
    directory = tmp_path / "index"
    with LocalIndex(directory) as lexical_only:
        lexical_only.update([corpus])
        assert not lexical_only.dense_ready and lexical_only.embedded_with == ""
        assert lexical_only.search("Danube", 1)[0].source.endswith("danube.txt")
    embedder = HashEmbedder()
    with LocalIndex(directory, embedder) as dense:
        stats = dense.update([corpus])
        assert stats.embedded == len(dense) and dense.dense_ready
    other = HashEmbedder(dim=32, name="other-model")
    with LocalIndex(directory, other) as switched:
        assert not switched.dense_ready  # vectors from another model are not used
        assert switched.search("Danube", 1)  # BM25 still answers
        assert switched.update([corpus]).embedded == len(switched)
        assert switched.dense_ready


def test_queries_with_fts_syntax_do_not_break(index: LocalIndex, corpus: Path) -> None:
    index.update([corpus])
    for query in ['"unbalanced', "NEAR(kelvin", "kelvin AND OR NOT *", "^col:x", "", "?!", "the of and", "_ __ a_b"]:
        index.search(query, 3)
    assert query_terms("the kelvin, THE scale Kelvin") == ["kelvin", "scale"]
    assert query_terms("the of") == ["the", "of"]
    assert query_terms("!!") == []


def test_bm25_scores_only_the_rarest_words_within_its_budget(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(30):
        extra = " The zebra crossed here." if i == 7 else ""
        (docs / f"d{i}.txt").write_text(f"Document {i} mentions a river and a mountain.{extra}")
    with LocalIndex(tmp_path / "index") as local:
        local.update([docs])
        db, gen = local._db(), local.generation
        lexical = LexicalSearch(budget=5)
        assert lexical.doc_freq(db, gen, "river") == 30 and lexical.doc_freq(db, gen, "zebra") == 1
        assert lexical.doc_freq(db, gen, "crossing") == 1  # FTS5's porter stemmer: crossing ~ crossed
        # 'zebra' fits the budget, 'river' does not: only the zebra passage is matched and scored.
        assert local.passages(lexical.search(db, gen, "zebra river", 10))[0].source.endswith("d7.txt")
        assert len(lexical.search(db, gen, "zebra river", 10)) == 1
        # Every word too common: all must match (AND), still answered.
        assert len(lexical.search(db, gen, "river mountain", 50)) == 30
        assert len(LexicalSearch(budget=10_000).search(db, gen, "zebra river", 50)) == 30
        assert lexical.search(db, gen, "unicorn", 5) == []


def test_reopened_index_answers_the_same(tmp_path: Path, corpus: Path) -> None:
    with LocalIndex(tmp_path / "index", HashEmbedder()) as first:
        first.update([corpus])
        before = first.search("river delta in Romania", 3)
    with LocalIndex(tmp_path / "index", HashEmbedder()) as again:
        assert again.search("river delta in Romania", 3) == before


def test_a_reader_sees_a_writers_new_generation(tmp_path: Path, corpus: Path) -> None:
    with LocalIndex(tmp_path / "index", HashEmbedder()) as writer, LocalIndex(tmp_path / "index", HashEmbedder()) as reader:
        writer.update([corpus])
        assert reader.search("Danube", 1)
        extra = corpus / "moon.md"
        extra.write_text("# Moon\n\nThe Moon orbits the Earth every 27.3 days.")
        writer.update([corpus])
        assert reader.search("Moon orbits", 1)[0].title == "Moon"
        assert reader.dense_ready


def test_a_repeated_search_is_answered_from_the_current_generation(tmp_path: Path, corpus: Path) -> None:
    with LocalIndex(tmp_path / "index", HashEmbedder()) as local:
        local.update([corpus])
        first = local.search("Moon orbits", 2)
        assert local.search("Moon orbits", 2) == first and local.search("Moon orbits", 1) == first[:1]
        (corpus / "moon.md").write_text("# Moon\n\nThe Moon orbits the Earth every 27.3 days.")
        local.update([corpus])
        assert local.search("Moon orbits", 2)[0].title == "Moon"


async def test_the_ranker_finds_the_query_embedding_the_source_computed(
    index: LocalIndex, corpus: Path, embedder: HashEmbedder
) -> None:
    index.update([corpus])
    cache = MemoryCache()
    source, ranker = LocalIndexSource(index, cache), RelevanceRanker(embedder, top_j=1, cache=cache)
    embedder.calls.clear()
    query = "Mount Fuji height"
    await ranker.rank(query, await source.search(query, 2))
    assert embedder.embedded.count(query) == 1


async def test_source_searches_in_a_thread_and_times_the_search_stage(index: LocalIndex, corpus: Path) -> None:
    index.update([corpus])
    source = LocalIndexSource(index)
    before = _stage_count("search")
    hits = await source.search("Mount Fuji height", 2)
    assert source.name == "index" and hits[0].source.endswith("fuji.html")
    assert _stage_count("search") == before + 1


async def test_source_never_raises(tmp_path: Path, corpus: Path, caplog: pytest.LogCaptureFixture) -> None:
    with LocalIndex(tmp_path / "index", FailingEmbedder()) as local:
        local.update([corpus])
        with caplog.at_level(logging.ERROR):
            assert await LocalIndexSource(local).search("Danube", 3) == []
        assert "embedding service down" in caplog.text


def _stage_count(stage: str) -> float:
    for metric in STAGE_LATENCY.collect():
        for sample in metric.samples:
            if sample.name.endswith("_count") and sample.labels.get("stage") == stage:
                return sample.value
    return 0.0


def test_ensure_demo_index_builds_once_and_leaves_other_indexes_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo = write_corpus(tmp_path / "demo")
    monkeypatch.setattr(index_module, "DEMO_CORPUS", demo.resolve())

    def no_model(*args: object) -> None:
        raise AssertionError("the embedder must not be loaded for a fresh demo index")

    monkeypatch.setattr("middleware.runtime.load_embedder", no_model)
    directory = tmp_path / "index"
    embedder = HashEmbedder()
    assert ensure_demo_index(directory, embedder) == directory
    with LocalIndex(directory, embedder) as local:
        assert len(local) > 0 and local.dense_ready
    assert DataPortrait.load(directory) is not None
    ensure_demo_index(directory)  # fresh: no embedder needed

    (demo / "danube.txt").write_text("The Danube is long.")
    embedder.calls.clear()
    ensure_demo_index(directory, embedder)
    assert embedder.embedded == ["The Danube is long."]

    user = tmp_path / "user-index"
    mine = tmp_path / "mine.txt"
    mine.write_text("My own notes.")
    with LocalIndex(user, embedder) as local:
        local.update([mine])
    ensure_demo_index(user)
    with LocalIndex(user) as local:
        assert local.documents() == [str(mine.resolve())]


def test_large_vector_sets_are_searched_through_binary_codes() -> None:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(40, 64)).astype(np.float32)
    rows = centres[rng.integers(0, 40, 3000)] + rng.normal(0, 0.3, (3000, 64)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    ids = np.arange(10, 3010, dtype=np.int64)
    exact = Vectors(1, "m", ids, rows.astype(np.float16), exact_rows=10_000)
    coded = Vectors(1, "m", ids, rows.astype(np.float16), exact_rows=100)
    assert coded.codes is not None and exact.codes is None
    hits = 0
    for i in range(0, 3000, 150):
        assert coded.nearest(rows[i], 5)[0] == ids[i]
        hits += len(set(coded.nearest(rows[i], 10)) & set(exact.nearest(rows[i], 10)))
    assert hits / (20 * 10) > 0.9
    assert exact.nearest(rows[0], 10_000) == coded.nearest(rows[0], 10_000)[:3000]


def test_binary_codes_are_saved_with_a_large_generation(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(300, 32)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    ids = np.arange(1, 301, dtype=np.int64)
    save_vectors(tmp_path, 4, ids, rows, exact_rows=100)
    assert (tmp_path / "codes-4.npz").is_file()
    loaded = load_vectors(tmp_path, 4, "m", exact_rows=100)
    assert loaded is not None and loaded.codes is not None
    fresh = Vectors(4, "m", ids, rows.astype(np.float16), exact_rows=100)
    assert np.array_equal(loaded.codes.codes, fresh.codes.codes)
    assert loaded.nearest(rows[17], 3)[0] == 18
    remove_vector_files(tmp_path, keep=5)
    assert list(tmp_path.iterdir()) == []
    assert load_vectors(tmp_path, 4, "m") is None


def test_new_window_settings_split_the_files_again(tmp_path: Path, corpus: Path) -> None:
    with LocalIndex(tmp_path / "index", HashEmbedder()) as local:
        local.update([corpus])
        assert local.update([corpus]).unchanged == 4
    with LocalIndex(tmp_path / "index", HashEmbedder(), window=1, stride=1) as narrow:
        stats = narrow.update([corpus])
        assert stats.updated == 4 and stats.unchanged == 0
        assert all(p.text.count(". ") == 0 for p in narrow.search("Danube river Black Sea", 5))
        assert narrow.update([corpus]).unchanged == 4
