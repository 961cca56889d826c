"""A scripted checker for the demo upstream's Curie and Apollo answers (adapters/demo_answers.yaml):
the verdicts, tags, evidence and stage timings the UI has to show, without the models."""

from __future__ import annotations

import asyncio

from middleware.types import CheckContext, Passage, Sentence, SentenceReport, Tag, Verdict
from tests.support.checkers import ScriptedChecker

DEMO_FIXES = {
    "in 1915": "in 1911",
    "followed by Michael Collins, while Buzz Aldrin": "followed by Buzz Aldrin, while Michael Collins",
}
OPINIONS = ("most impressive", "most romantic")
GREETINGS = ("Great question",)
UNSUPPORTED = ("only person to have won",)

CURIE = Passage(id="curie", provider="index", source="people/marie-curie.md", title="Marie Curie",
                text="In 1911 she received a second Nobel Prize, in Chemistry, for the discovery of polonium and radium.",
                score=0.87)
APOLLO = Passage(id="apollo", provider="wikipedia", source="https://en.wikipedia.org/wiki/Apollo_11",
                 url="https://en.wikipedia.org/wiki/Apollo_11", title="Apollo 11",
                 text="Armstrong was followed by Buzz Aldrin; Michael Collins piloted the command module in lunar orbit.",
                 score=0.81)


def _whole(sentence: Sentence, kind: str) -> Tag:
    return Tag(type=kind, start=sentence.start, end=sentence.end, text=sentence.text)  # type: ignore[arg-type]


class DemoChecker(ScriptedChecker):
    """Greetings and opinions skipped (opinions tagged FAVA ``subjective``), one unsupported
    claim ``extrapolatory`` with a whole-sentence ``unverifiable`` tag, the demo answers'
    deliberate errors contradicted with a fix; checks take time in proportion to the sentence
    and report stage timings that add up to most of it."""

    def __init__(self, pace_s: float = 0.002) -> None:
        super().__init__(DEMO_FIXES)
        self.pace_s = pace_s

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        seconds = 0.03 + self.pace_s * len(sentence.text)
        await asyncio.sleep(seconds)
        total = seconds * 1000.0 * 0.8
        text = sentence.text
        if any(g in text for g in GREETINGS):
            report = self._plain(sentence, Verdict(label="skipped", reason="greeting", backend="checkworthy"))
            return report.model_copy(update={"timings_ms": {"claims": total}})
        if any(o in text for o in OPINIONS):
            report = self._plain(sentence, Verdict(label="skipped", reason="subjective", backend="checkworthy"))
            return report.model_copy(update={"tags": [_whole(sentence, "subjective")], "timings_ms": {"claims": total}})
        if any(u in text for u in UNSUPPORTED):
            verdict = Verdict(label="extrapolatory", reason="no passage states it", scores={"extrapolatory": 0.7})
            report = self._plain(sentence, verdict)
            report = report.model_copy(update={"tags": [_whole(sentence, "unverifiable")], "evidence": [CURIE]})
        else:
            report = await super().check(sentence, context)
            evidence = [APOLLO, CURIE] if "Apollo" in text or "Armstrong" in text or "Moon" in text else [CURIE, APOLLO]
            report = report.model_copy(update={"evidence": evidence})
        timings = {"claims": total * 0.1, "questions": total * 0.15, "search": total * 0.4, "rerank": total * 0.1,
                   "verify": total * 0.25}
        return report.model_copy(update={"timings_ms": timings})

    @staticmethod
    def _plain(sentence: Sentence, verdict: Verdict) -> SentenceReport:
        return SentenceReport(index=sentence.index, start=sentence.start, end=sentence.end, text=sentence.text,
                              verdict=verdict)
