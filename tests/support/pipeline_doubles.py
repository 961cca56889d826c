"""Test doubles for the pipeline: a bag-of-words embedder, a rule-driven pair scorer and a
loopback OpenAI-compatible chat server that records the prompts it receives."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from aiohttp import web
from aiohttp.test_utils import TestServer

from middleware.evidence.lexical import terms
from tests.support.evidence_doubles import HashEmbedder


def HashingEmbedder() -> HashEmbedder:  # noqa: N802 (used like a class)
    """Hashed stemmed terms: similar wording -> similar vectors."""
    return HashEmbedder(dim=256, name="hash-terms", tokens=terms)


class RulePairScorer:
    """An NLI 'model' answering from a function of (premise, hypothesis) -> probabilities
    in ``labels`` order; records every batch it scores."""

    def __init__(
        self,
        rule: Callable[[str, str], Sequence[float]],
        labels: Sequence[str] = ("entailment", "neutral", "contradiction"),
        max_length: int = 128,
    ) -> None:
        self.rule = rule
        self.labels = list(labels)
        self.max_length = max_length
        self.batches: list[list[tuple[str, str]]] = []

    async def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.batches.append(list(pairs))
        return np.asarray([self.rule(p, h) for p, h in pairs], dtype=np.float32)


def keyword_rule(
    entail: str | None = None, contradict: str | None = None
) -> Callable[[str, str], list[float]]:
    """Entailment when the premise contains ``entail``, contradiction when it contains
    ``contradict``, else neutral."""

    def rule(premise: str, hypothesis: str) -> list[float]:
        if entail and entail in premise:
            return [0.9, 0.08, 0.02]
        if contradict and contradict in premise:
            return [0.05, 0.1, 0.85]
        return [0.1, 0.8, 0.1]

    return rule


class LoopbackChat:
    """An OpenAI-compatible /v1/chat/completions on 127.0.0.1. ``answer(messages, index)``
    gives the text of choice ``index``; ``choices_per_call`` limits how many choices one
    call returns (servers that ignore ``n``). Received request bodies are in ``requests``."""

    def __init__(
        self, answer: Callable[[list[dict[str, str]], int], str], choices_per_call: int | None = None
    ) -> None:
        self.answer = answer
        self.choices_per_call = choices_per_call
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self.server = TestServer(app, host="127.0.0.1")

    async def __aenter__(self) -> LoopbackChat:
        await self.server.start_server()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.close()

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("/v1"))

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        n = int(body.get("n", 1))
        if self.choices_per_call is not None:
            n = min(n, self.choices_per_call)
        start = sum(min(int(r.get("n", 1)), self.choices_per_call or 10**6) for r in self.requests[:-1])
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": self.answer(body["messages"], start + i)},
                "finish_reason": "stop",
            }
            for i in range(n)
        ]
        return web.json_response(
            {"id": "x", "object": "chat.completion", "model": body.get("model"), "choices": choices}
        )


_FENCE = re.compile(r"<<<(UNTRUSTED-[A-Z]+-[0-9a-f]+)>>>\n(.*?)\n<<<END-\1>>>", flags=re.S)


def fenced(text: str) -> list[str]:
    """The contents of every untrusted-data fence in ``text``."""
    return [body for _, body in _FENCE.findall(text)]


def unfenced(text: str) -> str:
    """``text`` with every fence and its contents removed (the instructions only)."""
    return _FENCE.sub("", text)
