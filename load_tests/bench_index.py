"""Benchmark of the local index: build throughput, query latency, memory.

    python -m load_tests.bench_index [--passages 100000] [--real-rows 2000] [--queries 300]

1. Demo corpus (the packaged ``middleware/evidence/demo_corpus``), real embedder: build from
   scratch (passages/s, portrait included), then query latency p50/p99 of ``LocalIndex.search``
   (query embedding + BM25 + dense + fusion + row fetch).
2. Generated corpus of ``--passages`` passages: deterministic synthetic documents (a word
   bigram chain trained on the demo corpus, with generated names, numbers and years mixed
   in), written as JSON lines and indexed through the same ``update`` path.
   Embedding 100k passages with MiniLM on 2 shared cores takes far longer than 15 minutes
   (the real rate is measured and the full time projected), so by default only the first
   ``--real-rows`` passages are embedded by the model; every other passage gets the vector
   of a pseudo-randomly chosen embedded passage plus Gaussian noise (sigma 0.05 per
   dimension, re-normalised). The index then has 100k realistic-looking vectors for the
   latency and memory figures; the build figure is reported both as measured (with the
   cheap vectors) and projected with the real embedding rate. ``--real-rows 0`` embeds all.
3. RSS of a fresh process that loads the embedder and the 100k index and answers queries.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from middleware.evidence.documents import find_files
from middleware.evidence.index import DEMO_CORPUS, LocalIndex
from middleware.evidence.portrait import DataPortrait
from middleware.evidence.vectors import Vectors
from middleware.settings import load_settings

BUDGET_S = 15 * 60
_TOKEN = re.compile(r"\S+")


class ReplicatingEmbedder:
    """Embeds the first ``real_rows`` texts with ``real``; later texts get a real row chosen
    by a hash of the text, plus noise. Same name and dim as ``real``, so the index accepts
    the real embedder's query vectors. Benchmark only: these vectors carry no meaning."""

    def __init__(self, real, real_rows: int, sigma: float = 0.05) -> None:
        self.real = real
        self.name, self.dim = real.name, real.dim
        self.real_rows = real_rows
        self.sigma = sigma
        self.rows: list[np.ndarray] = []
        self.real_seconds = 0.0
        self.rng = np.random.default_rng(0)

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        room = max(self.real_rows - len(self.rows), 0)
        head, tail = list(texts[:room]), list(texts[room:])
        out = []
        if head:
            t0 = time.perf_counter()
            real = self.real.embed_sync(head)
            self.real_seconds += time.perf_counter() - t0
            self.rows.extend(real)
            out.append(real)
        if tail:
            base = np.stack([self.rows[hash_index(t, len(self.rows))] for t in tail])
            noisy = base + self.rng.normal(0.0, self.sigma, base.shape).astype(np.float32)
            out.append(noisy / np.linalg.norm(noisy, axis=1, keepdims=True))
        return np.concatenate(out).astype(np.float32)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await self.real.embed(texts)


def hash_index(text: str, n: int) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") % n


# -- generated corpus -------------------------------------------------------------------


class CorpusGenerator:
    """Deterministic synthetic documents: sentences from a word bigram chain over the demo
    corpus, with generated proper names, numbers and years, and markdown section headings."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.next_words: dict[str, list[str]] = defaultdict(list)
        self.starts: list[str] = []
        for path in find_files([DEMO_CORPUS]):
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.startswith("#") or not line.strip():
                    continue
                words = _TOKEN.findall(line)
                for i, word in enumerate(words):
                    if i == 0 or words[i - 1].endswith("."):
                        self.starts.append(word)
                    if i + 1 < len(words):
                        self.next_words[word].append(words[i + 1])
        if not self.starts:
            raise SystemExit(f"no demo corpus under {DEMO_CORPUS}")
        syllables = ["ka", "lo", "mi", "ren", "tar", "vo", "sel", "dun", "bri", "qua", "zen", "hol", "mar", "ost"]
        self.names = sorted({"".join(self.rng.choices(syllables, k=self.rng.randint(2, 4))).title() for _ in range(5000)})

    def sentence(self) -> str:
        word = self.rng.choice(self.starts)
        words = [word]
        while not word.endswith(".") and len(words) < 35:
            options = self.next_words.get(word)
            if not options:
                break
            word = self.rng.choice(options)
            words.append(word)
        roll = self.rng.random()
        if roll < 0.3:
            words.insert(self.rng.randrange(len(words)), self.rng.choice(self.names))
        elif roll < 0.5:
            words.insert(self.rng.randrange(len(words)), str(self.rng.randint(1000, 2024)))
        elif roll < 0.6:
            words.insert(self.rng.randrange(len(words)), f"{self.rng.randint(1, 99_999):,}")
        text = " ".join(words)
        return text if text.endswith(".") else text.rstrip(",;:") + "."

    def document(self) -> dict[str, str]:
        title = f"{self.rng.choice(self.names)} {self.rng.choice(self.names)}"
        sections = []
        for s in range(self.rng.randint(1, 3)):
            body = " ".join(self.sentence() for _ in range(self.rng.randint(3, 9)))
            sections.append(body if s == 0 else f"## {self.rng.choice(self.names)}\n\n{body}")
        return {"title": title, "text": "\n\n".join(sections), "url": f"https://synthetic.example/{title.replace(' ', '_')}"}


def write_corpus(directory: Path, passages: int, window: int, stride: int) -> tuple[int, float]:
    """Write JSON-lines files until they hold about ``passages`` passages; return (count, s)."""
    from middleware.evidence.passages import document_passages

    t0 = time.perf_counter()
    directory.mkdir(parents=True, exist_ok=True)
    gen = CorpusGenerator()
    total, part, fh = 0, 0, None
    while total < passages:
        if fh is None or fh.tell() > 4_000_000:
            if fh:
                fh.close()
            fh = open(directory / f"part-{part:04d}.jsonl", "w", encoding="utf-8")
            part += 1
        doc = gen.document()
        total += len(document_passages(doc["text"], "x", window=window, stride=stride))
        fh.write(json.dumps(doc) + "\n")
    if fh:
        fh.close()
    return total, time.perf_counter() - t0


def first_passages(corpus: Path, n: int, window: int, stride: int) -> list[str]:
    from middleware.evidence.passages import embedding_text, document_passages

    out: list[str] = []
    with open(sorted(corpus.glob("*.jsonl"))[0], encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            out.extend(embedding_text(p) for p in document_passages(doc["text"], "x", doc["title"], window, stride))
            if len(out) >= n:
                break
    return out[:n]


def sample_queries(local: LocalIndex, n: int, seed: int = 1) -> list[str]:
    """Queries made of 4-8 consecutive words of random passages (with the leading words of
    a question), so they resemble verification questions about the corpus."""
    rng = random.Random(seed)
    db = local._db()
    count = db.execute("SELECT max(id) FROM passages").fetchone()[0] or 0
    out = []
    while len(out) < n and count:
        row = db.execute("SELECT text FROM passages WHERE id >= ? LIMIT 1", (rng.randint(1, count),)).fetchone()
        words = _TOKEN.findall(row[0]) if row else []
        if len(words) < 8:
            continue
        start = rng.randrange(len(words) - 6)
        span = " ".join(words[start : start + rng.randint(4, 8)])
        out.append(f"{rng.choice(['What', 'When', 'Who', 'Where', 'How many'])} {span}?")
    return out


# -- measuring --------------------------------------------------------------------------


def percentiles(samples: Sequence[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p99 = ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]
    return f"p50 {statistics.median(ms):6.2f} ms  p99 {p99:6.2f} ms  (n={len(ms)})"


def time_queries(local: LocalIndex, embedder, queries: Sequence[str], k: int = 5) -> dict[str, list[float]]:
    """Latency of the whole search and of its parts, per query (after a warm-up). The CPU
    time of the process (all threads) is also given: on a shared machine the wall time
    includes waiting for a core."""
    for q in queries[:10]:
        local.search(q, k)
    parts: dict[str, list[float]] = defaultdict(list)
    n = max(local.candidates, k)
    for q in queries:
        c0 = time.process_time()
        t0 = time.perf_counter()
        local.search(q, k)
        t1 = time.perf_counter()
        parts["search (CPU time)"].append(time.process_time() - c0)
        vector = embedder.embed_sync([q])[0]
        t2 = time.perf_counter()
        local.lexical(q, n)
        t3 = time.perf_counter()
        local.dense(vector, n)
        t4 = time.perf_counter()
        parts["search (all)"].append(t1 - t0)
        parts["  query embedding"].append(t2 - t1)
        parts["  BM25 (FTS5)"].append(t3 - t2)
        parts["  dense (matrix)"].append(t4 - t3)
    return parts


def print_parts(parts: dict[str, list[float]]) -> None:
    for name, samples in parts.items():
        print(f"  {name:20s} {percentiles(samples)}")


def bench_demo(work: Path, embedder, settings, queries: int) -> None:
    print(f"== demo corpus ({len(find_files([DEMO_CORPUS]))} files) ==")
    with LocalIndex.from_settings(work / "demo-index", embedder, settings.evidence) as local:
        stats = local.update([DEMO_CORPUS])
        print(
            f"  build: {stats.passages_total} passages in {stats.seconds:.1f} s "
            f"= {stats.passages_total / stats.seconds:.1f} passages/s (split, SQLite, embedding, portrait)"
        )
        portrait = DataPortrait.load(local.directory)
        print(f"  portrait: {len(portrait) if portrait else 0} 25-grams")
        print_parts(time_queries(local, embedder, sample_queries(local, queries)))


def bench_generated(work: Path, embedder, settings, passages: int, real_rows: int, queries: int) -> Path:
    ev = settings.evidence
    print(f"== generated corpus ({passages} passages) ==")
    corpus = work / "generated"
    count, seconds = write_corpus(corpus, passages, ev.passage_sentences, ev.passage_stride)
    print(f"  generated {count} passages in {seconds:.1f} s")

    probe = first_passages(corpus, 256, ev.passage_sentences, ev.passage_stride)
    t0 = time.perf_counter()
    embedder.embed_sync(probe)
    rate = len(probe) / (time.perf_counter() - t0)
    projected = count / rate
    print(f"  real embedding rate {rate:.1f} passages/s: embedding {count} would take {projected / 60:.1f} min")
    if real_rows == 0 or projected <= BUDGET_S:
        real_rows = count
    else:
        print(f"  > {BUDGET_S // 60} min: embedding {real_rows} passages for real, replicating vectors with noise")
    cheap = ReplicatingEmbedder(embedder, real_rows)
    directory = work / "generated-index"
    with LocalIndex.from_settings(directory, cheap, ev, portrait=False) as local:
        stats = local.update([corpus])
        build_without_model = stats.seconds - cheap.real_seconds
        real_rate = min(real_rows, count) / cheap.real_seconds if cheap.real_seconds else rate
        full = build_without_model + count / real_rate
        print(
            f"  build: {stats.passages_total} passages in {stats.seconds:.1f} s, of which model "
            f"{cheap.real_seconds:.1f} s for {min(real_rows, count)} rows ({real_rate:.1f}/s)"
        )
        print(f"  build without the model: {stats.passages_total / build_without_model:.0f} passages/s")
        print(f"  build with the model for every row (projected): {stats.passages_total / full:.1f} passages/s "
              f"({full / 60:.1f} min)")
        size = sum(p.stat().st_size for p in directory.iterdir())
        print(f"  index on disk: {size / 2**20:.0f} MiB")
        query_set = sample_queries(local, queries)
    (work / "queries.json").write_text(json.dumps(query_set))
    return directory


def rss_probe(directory: Path, queries_file: Path) -> None:
    """Run in a fresh process: RSS after loading the embedder, then after the index."""
    import psutil

    from middleware.runtime import load_embedder

    proc = psutil.Process()
    settings = load_settings()
    embedder = load_embedder(settings.runtime)
    base = proc.memory_info().rss
    queries = json.loads(queries_file.read_text())
    with LocalIndex.from_settings(directory, embedder, settings.evidence, portrait=False) as local:
        parts = time_queries(local, embedder, queries)
        loaded = proc.memory_info().rss
        print(f"  {len(local)} passages, fresh process: RSS {loaded / 2**20:.0f} MiB "
              f"(embedder and runtime {base / 2**20:.0f} MiB, index {(loaded - base) / 2**20:.0f} MiB)")
        print_parts(parts)
        print_dense_recall(local, embedder.embed_sync(queries[:100]))


def print_dense_recall(local: LocalIndex, queries: np.ndarray, n: int = 50) -> None:
    """Agreement of the index's dense candidates with an exact scan of every row."""
    vectors = local._current_vectors()
    if vectors.matrix is None or vectors.ids is None:
        return
    exact = Vectors(vectors.generation, vectors.fingerprint, vectors.ids, vectors.matrix, exact_rows=len(vectors.ids))
    at10, at50 = [], []
    for q in queries:
        got, want = vectors.nearest(q, n), exact.nearest(q, n)
        at10.append(len(set(got[:10]) & set(want[:10])) / 10)
        at50.append(len(set(got) & set(want)) / n)
    mode = "exact scan" if vectors.codes is None else "binary codes + exact rescoring"
    print(f"  dense ({mode}) recall vs exact: @10 {np.mean(at10):.3f}, @{n} {np.mean(at50):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--real-rows", type=int, default=2000, help="rows embedded by the model (0: all)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the indexes here (default: temp dir)")
    parser.add_argument("--skip-demo", action="store_true")
    parser.add_argument("--rss-probe", nargs=2, type=Path, metavar=("INDEX", "QUERIES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_probe:
        rss_probe(*args.rss_probe)
        return

    from middleware.runtime import load_embedder

    settings = load_settings()
    embedder = load_embedder(settings.runtime)
    print(f"embedder {embedder.name} (dim {embedder.dim}), {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
        work = args.workdir or Path(tmp)
        if not args.skip_demo:
            bench_demo(work, embedder, settings, min(args.queries, 200))
        directory = bench_generated(work, embedder, settings, args.passages, args.real_rows, args.queries)
        print(f"== loaded {args.passages // 1000}k index, query latency and memory (fresh process) ==")
        subprocess.run(
            [sys.executable, "-m", "load_tests.bench_index", "--rss-probe", str(directory), str(work / "queries.json")],
            check=True,
        )


if __name__ == "__main__":
    main()
