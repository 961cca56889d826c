"""The memory check's closed-book call: the upstream asked the user's question without the
request's context, beside the main stream (``memory.MemoryCheck`` compares the answer).

It is the request's, made on the relay's event loop (it is I/O), so it lives apart from the
check itself: a relay imports this without the evidence search and its NLP libraries."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from middleware.evidence.request_passages import QUESTION_MAX_CHARS
from middleware.interfaces import Upstream
from middleware.metrics import MEMORY_CHECK_LATENCY, MEMORY_CHECK_TOKENS
from middleware.text.answer_segmenter import segment_text
from middleware.types import SegmentKind

log = logging.getLogger(__name__)

_CLOSED_BOOK_DROP = frozenset({
    "messages", "stream", "stream_options", "n", "max_tokens", "max_completion_tokens", "tools", "tool_choice",
    "functions", "function_call", "parallel_tool_calls", "response_format", "logprobs", "top_logprobs", "audio",
    "modalities", "prediction", "store",
})


def sentences_of(text: str) -> list[str]:
    """The sentence (and table row) texts of ``text``."""
    return [s.text.strip() for s in segment_text(text)
            if s.kind in (SegmentKind.SENTENCE, SegmentKind.TABLE) and s.text.strip()]


def closed_book_question(text: str) -> str:
    """What to ask closed-book: the user's message, or, when it is long enough to hold
    documents, its questions (sentences ending in '?'), else its shortest of first and
    last paragraph (where an instruction usually sits)."""
    text = text.strip()
    if len(text) <= QUESTION_MAX_CHARS:
        return text
    questions = [s for s in sentences_of(text) if s.rstrip("\"')]*_").endswith("?")]
    if questions:
        return " ".join(questions)
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    return min((paragraphs[0], paragraphs[-1]), key=len)[:QUESTION_MAX_CHARS]


def closed_book_body(forward: Mapping[str, Any], question: str, max_tokens: int) -> dict[str, Any]:
    """The main request's body without its context: the user's question alone (no system,
    tool or earlier messages, no tools), not streamed, ``max_tokens`` long. Sampling fields
    and the model are kept, so it is the same model answering from memory."""
    body = {key: value for key, value in forward.items() if key not in _CLOSED_BOOK_DROP}
    body["messages"] = [{"role": "user", "content": question}]
    body["stream"] = False
    body["max_completion_tokens" if "max_completion_tokens" in forward else "max_tokens"] = max_tokens
    return body


class ClosedBook:
    """The closed-book upstream call of one request, started at once. ``task`` resolves to
    its text, or None when it failed (logged; never an error in the stream). Its tokens
    (prompt + completion) and time go to ``MEMORY_CHECK_TOKENS`` / ``MEMORY_CHECK_LATENCY``."""

    def __init__(self, upstream: Upstream, body: dict[str, Any], headers: Mapping[str, str]) -> None:
        self.usage: dict[str, int] = {}
        self.seconds: float | None = None
        self.task = asyncio.create_task(self._ask(upstream, body, dict(headers)), name="closed-book")

    @classmethod
    def start(cls, upstream: Upstream, forward: Mapping[str, Any], headers: Mapping[str, str], question: str,
              max_tokens: int) -> ClosedBook:
        """Ask ``question`` closed-book, with the model and sampling of the client's body ``forward``."""
        return cls(upstream, closed_book_body(forward, closed_book_question(question), max_tokens), headers)

    async def _ask(self, upstream: Upstream, body: dict[str, Any], headers: dict[str, str]) -> str | None:
        t0 = time.perf_counter()
        try:
            _, completion = await upstream.complete(body, headers)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the memory signal is optional: no signal, no error
            log.warning("closed-book call for the memory check failed: %s", exc)
            return None
        finally:
            self.seconds = time.perf_counter() - t0
        MEMORY_CHECK_LATENCY.observe(self.seconds)
        usage = completion.get("usage") if isinstance(completion, dict) else None
        if isinstance(usage, dict):
            self.usage = {k: int(usage.get(k) or 0) for k in ("prompt_tokens", "completion_tokens")}
            MEMORY_CHECK_TOKENS.inc(sum(self.usage.values()))
        try:
            content = completion["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str) or not content.strip():
            log.warning("closed-book call for the memory check returned no text")
            return None
        return content
