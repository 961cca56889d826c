"""Doubles for according-to prompting: an upstream wrapper that records the bodies the proxy
sends, a fake LLM whose answers depend on the grounding instruction, and a checker that scores
QUIP against a portrait of demo corpus documents."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from middleware.checking import SentenceChecker
from middleware.evidence.index import DEMO_CORPUS
from middleware.evidence.portrait import DataPortrait
from middleware.interfaces import Upstream, UpstreamStream
from middleware.types import CheckContext, Sentence, SentenceReport, Verdict


class RecordingUpstream:
    """Wraps the proxy's upstream client and records each body it is handed, as the bytes the
    client sends (``adapters.upstream.UpstreamClient`` posts ``json.dumps(body)``)."""

    def __init__(self, inner: Upstream) -> None:
        self.inner = inner
        self.bodies: list[dict[str, Any]] = []
        self.sent: list[bytes] = []

    def _record(self, body: dict[str, Any]) -> None:
        self.bodies.append(body)
        self.sent.append(json.dumps(body).encode())

    async def open_stream(self, body: dict[str, Any], client_headers: Mapping[str, str]) -> UpstreamStream:
        self._record(body)
        return await self.inner.open_stream(body, client_headers)

    async def complete(self, body: dict[str, Any], client_headers: Mapping[str, str]) -> tuple[bytes, dict[str, Any]]:
        self._record(body)
        return await self.inner.complete(body, client_headers)

    async def get(self, path: str, client_headers: Mapping[str, str]) -> tuple[int, bytes, str]:
        return await self.inner.get(path, client_headers)

    async def close(self) -> None:
        await self.inner.close()


GROUNDED = "using only information that can be attributed to"
ANTI_GROUNDED = "without using any information from"

TOPICS: dict[str, dict[str, Any]] = {
    "eiffel": {
        "document": DEMO_CORPUS / "places" / "eiffel-tower.md",
        "quotes": [
            "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.",
            "The tower was originally 300 metres tall and is now 330 metres tall including its antennas.",
        ],
        "paraphrases": [
            "Paris has a famous iron landmark that a firm run by Eiffel put up for a big fair.",
            "Builders wrapped up the work in the spring of 1889, and today it reaches roughly a third of a km.",
        ],
    },
    "curie": {
        "document": DEMO_CORPUS / "people" / "marie-curie.md",
        "quotes": [
            "In 1898, together with her husband Pierre Curie, she discovered the chemical elements polonium and radium.",
            "She received the 1911 Nobel Prize in Chemistry alone, and remains the only person to have won Nobel "
            "Prizes in two different sciences.",
        ],
        "paraphrases": [
            "With Pierre, her spouse, the Warsaw-born scientist found two new radioactive metals near the end of "
            "the nineteenth century.",
            "Years later a second Nobel award, this one for chemistry, made her unique across two fields.",
        ],
    },
}


def fake_answer(messages: list[dict[str, Any]]) -> str:
    """Quotes the demo corpus when told to ground the answer, paraphrases when told not to, and
    mixes the two (one sentence of each) when told nothing. The instruction counts wherever it
    sits (the user message or a system message)."""
    said = " ".join(_text(m.get("content")) for m in messages)
    topic = next((t for key, t in TOPICS.items() if key in said.lower()), TOPICS["eiffel"])
    if GROUNDED in said:
        return " ".join(topic["quotes"])
    if ANTI_GROUNDED in said:
        return " ".join(topic["paraphrases"])
    return f"{topic['quotes'][0]} {topic['paraphrases'][1]}"


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


class FakeGroundingLLM:
    """An OpenAI-compatible non-stream ``/v1/chat/completions`` on 127.0.0.1 (a thread of its
    own, so sync and async tests can use it) answering with ``fake_answer``; records bodies."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        double = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                double.bodies.append(body)
                text = fake_answer(body["messages"])
                payload = json.dumps({
                    "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}],
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@contextmanager
def fake_grounding_llm() -> Iterator[FakeGroundingLLM]:
    llm = FakeGroundingLLM()
    thread = threading.Thread(target=llm.server.serve_forever, name="fake-grounding-llm", daemon=True)
    thread.start()
    try:
        yield llm
    finally:
        llm.server.shutdown()
        llm.server.server_close()
        thread.join(timeout=10)


def portrait_of(paths: list[Path]) -> DataPortrait:
    portrait = DataPortrait()
    portrait.add_texts(path.read_text(encoding="utf-8") for path in paths)
    return portrait


class QuipChecker(SentenceChecker):
    """Every sentence attributable, with its QUIP-Score against ``portrait``."""

    def __init__(self, portrait: DataPortrait) -> None:
        self.portrait = portrait

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        return SentenceReport(index=sentence.index, start=sentence.start, end=sentence.end, text=sentence.text,
                              verdict=Verdict(label="attributable"), quip=self.portrait.quip_score(sentence.text))
