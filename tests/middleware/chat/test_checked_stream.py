"""The checked stream's own duties, whatever the face: the checker reads the request's
context once, when the answer starts; a whole answer's checks have the budget of the answer."""

from __future__ import annotations

from middleware.chat.checked_stream import CheckedStream, CheckedText, TextSource, whole_answer_budget
from middleware.checking import CheckRunner
from middleware.settings import CheckSettings
from middleware.types import CheckContext, Mode, Sentence, SentenceReport
from tests.support.checkers import ScriptedChecker


class PreparingChecker(ScriptedChecker):
    """Records, in order, the request contexts it prepared and the sentences it checked."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, object]] = []

    def prepare(self, context: CheckContext) -> None:
        context.prepared["seen"] = True
        self.calls.append(("prepare", context.user_message))

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        self.calls.append(("check", context.prepared.get("seen")))
        return await super().check(sentence, context)


async def test_a_checked_stream_prepares_the_request_once_before_its_first_check():
    for mode in (Mode.ANNOTATE, Mode.CORRECT, Mode.OFF):
        checker = PreparingChecker()
        context = CheckContext(user_message="Tell me about Curie.", mode=mode)
        stream = CheckedStream(TextSource("Curie was born in 1867. She died in 1934."), CheckRunner(checker, CheckSettings()),
                               context)
        [event async for event in stream.run()]
        # each sentence's check sees what the one preparation stored in the request's context
        expected = [] if mode is Mode.OFF else [("prepare", "Tell me about Curie."), ("check", True), ("check", True)]
        assert checker.calls == expected


async def test_checked_text_without_a_stream_prepares_at_its_first_sentence():
    checker = PreparingChecker()
    text = CheckedText(CheckRunner(checker, CheckSettings()), CheckContext(user_message="Q?"))
    assert text.feed("Hello") == [] and checker.calls == []
    text.feed(" world. Curie was born in 1867. ")
    text.flush()
    await text.wait()
    assert checker.calls == [("prepare", "Q?"), ("check", True), ("check", True)]


async def test_a_checker_that_prepares_nothing_is_checked_as_before():
    plain = CheckedText(CheckRunner(ScriptedChecker(), CheckSettings()), CheckContext(user_message="Q?"))
    plain.feed("Curie was born in 1867. She died in 1934.")
    plain.flush()
    assert [r.verdict.label for r in await plain.wait()] == ["attributable", "attributable"]


def test_a_whole_answer_has_the_budget_of_its_waves_of_checks():
    runner = CheckRunner(ScriptedChecker(), CheckSettings(sentence_budget_s=1.5, max_checks_per_stream=4))
    four = "One is here. Two is here. Three is here. Four is here."
    assert whole_answer_budget(runner, four) == 1.5
    assert whole_answer_budget(runner, four + " Five is here.") == 3.0
    assert whole_answer_budget(runner, "## A heading only\n") == 1.5
