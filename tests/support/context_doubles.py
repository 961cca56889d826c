"""What the tests of the request's context and of the memory check share: a request whose
system message holds a document, answers that follow it, contradict it or come from memory,
an 'index' that counts its searches, the real pipeline with offline backends, and a client
that reads a proxied stream's sentence reports."""

from __future__ import annotations

from typing import Any

import aiohttp

from middleware.evidence.relevance import RelevanceRanker
from middleware.pipeline.alignment import Aligner
from middleware.pipeline.cqgen import SlotQuestionGenerator
from middleware.pipeline.decontext import NoDecontextualiser
from middleware.pipeline.factchecker import FactChecker, PipelineParts
from middleware.pipeline.verifiers import SlotsVerifier
from middleware.sse import SSEParser
from middleware.types import Passage
from tests.support.pipeline_doubles import HashingEmbedder

DOCUMENT = (
    "Acme Corporation is a maker of garden tools based in Toledo, Ohio. It was founded in 1952 by Ruth Alvarez. "
    "In March 2024 Acme appointed Jane Doe as chief executive, replacing the founder's grandson. "
    "The company employs 1,200 people."
)
SYSTEM = f"Answer from the documents.\n\n{DOCUMENT}"
QUESTION = "Who runs Acme Corporation, and when was it founded?"
FOLLOWS = "Acme Corporation was founded in 1952 by Ruth Alvarez. Jane Doe became chief executive of Acme in March 2024."
CONTRADICTS = "Acme Corporation was founded in 1948 by Ruth Alvarez."
CLOSED_BOOK = "John Smith is the chief executive of Acme Corporation. He has led the company since 2010."
FROM_MEMORY = "John Smith is the chief executive of Acme Corporation. Jane Doe became chief executive of Acme in March 2024."
INDEX_TEXT = "Acme Corporation was founded in 1948 in Detroit by Ruth Alvarez."
PASTED = f"Here is our internal memo. {DOCUMENT} {DOCUMENT}\n\nWhat does it say about the founder?"
ROOMY = {"check.sentence_budget_s": 10.0}
"""A budget no healthy check on a loaded machine runs into: these tests are not about time."""


class CountingSource:
    """An 'index' holding fixed passages that match every query; counts its searches."""

    name = "index"

    def __init__(self, texts: tuple[str, ...] = (INDEX_TEXT,)) -> None:
        self.passages = [Passage(id=f"i{i}", text=t, provider="index", source=f"doc{i}.md") for i, t in enumerate(texts)]
        self.searches = 0

    async def search(self, query: str, k: int) -> list[Passage]:
        self.searches += 1
        return self.passages[:k]


def checker(policy: str = "among", index: CountingSource | None = None,
            whole_chars: int = 20_000) -> tuple[FactChecker, CountingSource]:
    """The real pipeline with offline backends and a hashed bag-of-words embedder."""
    index = index or CountingSource()
    embedder = HashingEmbedder()
    return FactChecker(PipelineParts(
        sources=[index], questions=SlotQuestionGenerator(), decontext=NoDecontextualiser(),
        verifier=SlotsVerifier(Aligner(embedder)), ranker=RelevanceRanker(embedder, top_j=2), embedder=embedder,
        top_j=2, context_policy=policy, context_whole_chars=whole_chars,
    )), index


def body(answer: str, *, mode: str = "annotate", stream: bool = True, **factcheck: Any) -> dict[str, Any]:
    return {
        "model": "m", "stream": stream, "temperature": 0.2, "stream_options": {"include_usage": True},
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
        "mock": {"text": answer, "closed_book_text": CLOSED_BOOK},
        "factcheck": {"mode": mode, **factcheck},
    }


async def stream_reports(url: str, request: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The streamed content and the sentence reports, read to [DONE]."""
    parser, content, reports = SSEParser(), [], []
    async with aiohttp.ClientSession() as session, session.post(f"{url}/chat/completions", json=request) as resp:
        assert resp.status == 200
        events = parser.feed(await resp.read()) + parser.flush()
    assert events[-1].is_done
    for event in events[:-1]:
        chunk = event.json()
        if "factcheck" in chunk and chunk["factcheck"]["type"] == "sentence":
            reports.append(chunk["factcheck"]["report"])
        for choice in chunk.get("choices", []):
            content.append((choice.get("delta") or {}).get("content") or "")
    return "".join(content), sorted(reports, key=lambda r: r["index"])
