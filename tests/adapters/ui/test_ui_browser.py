"""The UI at ``/`` end to end in a real headless Chromium (Debian's /usr/bin/chromium, driven by
Playwright's Python client): what the page shows has to be what happened. Applied and
suggested corrections look different and the page says what the client received; the
sentence table shows the sentences on one time scale, with timeouts said as such; a legend
explains the colours and tags; Markdown is rendered without ever parsing the model's text as
HTML; sources are titles, links only for http(s); Stop and an oversized message are said
plainly. Screenshots go to test-artifacts/ (git-ignored)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import aiohttp
import pytest

from adapters.demo_upstream import DemoAnswers
from adapters.ui import UI_DIR
from middleware.types import CheckContext, Passage, Revision, Sentence, SentenceReport
from tests.adapters.ui.demo_checker import DemoChecker
from tests.support.checkers import ScriptedChecker
from tests.support.paths import ARTIFACTS as TEST_ARTIFACTS

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = TEST_ARTIFACTS
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ANSWER = "Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1905. She died in 1934."
FIXES = {"1905": "1903"}
HOSTILE = '<img src=x onerror="document.title=\'pwned\'">Nobel Prize in Physics 1903'

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium not installed at /usr/bin/chromium "
                       "(run .ci/chromium.sh)"),
]


class EvidenceChecker(ScriptedChecker):
    """The scripted verdicts plus evidence (a corpus file, a web page, and a passage with
    markup in its text and a javascript: URL: both must reach the page as inert text) and
    stage timings."""

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        report = await super().check(sentence, context)
        evidence = [
            Passage(id="p1", text=HOSTILE, provider="index", source="people/marie-curie.md", title="Marie Curie",
                    score=0.91),
            Passage(id="p2", text="A web page.", provider="wikipedia", source="https://example.org/curie",
                    url="https://example.org/curie", title="Curie on the web", score=0.66),
            Passage(id="p3", text="A second source.", provider="web", source="javascript:alert(1)",
                    url="javascript:alert(1)", title="Sneaky link", score=0.42),
        ]
        timings = {"claims": 1.5, "search": 12.0, "verify": 7.25, "edit": 0.5}
        return report.model_copy(update={"evidence": evidence, "timings_ms": timings})


@pytest.fixture
async def page():
    from playwright.async_api import async_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        context = await browser.new_context(viewport={"width": 1280, "height": 900})
        page = await context.new_page()
        page.set_default_timeout(10_000)
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
        page.on("console", lambda msg: problems.append(f"console: {msg.text}") if msg.type == "error" else None)
        page.problems = problems  # type: ignore[attr-defined]
        try:
            yield page
        finally:
            await browser.close()


async def open_ui(make_proxy, page, checker=None, answers=None, token_rate: float = 40.0, **overrides):
    proxy = await make_proxy(checker if checker is not None else EvidenceChecker(FIXES), **overrides)
    proxy.upstream.answers = answers or DemoAnswers(answers=[{"keywords": ["curie"], "answer": ANSWER}])
    proxy.upstream.default_rate = token_rate
    await page.goto(proxy.url.removesuffix("/v1") + "/")
    await page.wait_for_selector('#status[data-state="open"]', timeout=10_000)
    return proxy


async def ask(page, question: str = "Who was Marie Curie?", mode: str | None = None) -> None:
    if mode is not None:
        await page.check(f'input[name="mode"][value="{mode}"]')
    await page.fill("#question", question)
    await page.press("#question", "Enter")


async def finished(page, state: str = "done", timeout: float = 15_000) -> None:
    await page.wait_for_selector(f'#answer[data-state="{state}"]', timeout=timeout)


def shot(name: str) -> str:
    return str(ARTIFACTS / f"ui-{name}.png")


async def last_look(page, name: str) -> None:
    """A full-page screenshot, and no script error or console error on the way."""
    await page.screenshot(path=shot(name), full_page=True)
    assert page.problems == []


async def text(page, selector: str) -> str:
    return await page.locator(selector).text_content() or ""


async def test_annotate_mode_suggests_corrections_and_says_the_client_got_the_original(make_proxy, page):
    await open_ui(make_proxy, page)
    assert await page.title() == "factcheck: streaming fact-checking"
    assert await page.input_value("#model") == "factcheck-demo"  # from /v1/models
    await ask(page, mode="annotate")

    # Part of the answer is on screen while the rest is still streaming.
    await page.wait_for_function(
        "() => document.querySelector('#answer').dataset.state === 'streaming'"
        " && document.querySelector('#answer').textContent.length > 10"
    )
    await page.screenshot(path=shot("streaming"))
    await finished(page)

    assert await page.locator("#answer .sentence").count() == 3
    bad = page.locator('#answer .sentence[data-verdict="contradictory"]')
    assert await bad.count() == 1
    assert await bad.get_attribute("data-outcome") == "suggested"
    # The client received "1905": it is shown as written (underlined), the fix only as a proposal.
    assert await bad.locator(".edit.suggested mark").text_content() == "1905"
    assert await bad.locator(".edit.suggested .suggestion").text_content() == "1903?"
    assert await page.locator("#answer del, #answer ins").count() == 0  # nothing struck: nothing was applied
    decoration = await bad.locator("mark").evaluate("e => getComputedStyle(e).textDecorationLine")
    assert "line-through" not in decoration and "underline" in decoration
    received = page.locator("#received")
    assert await received.get_attribute("data-mode") == "annotate"
    assert await received.get_attribute("data-suggested") == "1"
    assert "received the model's answer unchanged" in await received.text_content()
    assert "not applied" in await received.text_content()
    assert await page.locator("#raw-text").text_content() == ANSWER  # byte for byte what the client got
    assert "verdicts" not in await text(page, "#summary")  # rendered, not raw JSON
    assert "contradictory: 1" in await text(page, "#summary")
    assert await page.locator("#report-rows tr").count() == 3
    assert "suggestion only" in await page.locator('#report-rows tr[data-index="1"]').text_content()

    await bad.click()
    body = page.locator("#details-body")
    await body.wait_for(state="visible")
    assert "Corrections suggested (not applied)" in await body.text_content()
    assert "1905" in await body.locator(".received-text").text_content()
    timings = await body.locator("table.timings").text_content()
    assert "verify" in timings and "7.3 ms" in timings and "21 ms" in timings  # the stages and their total
    await last_look(page, "annotate")


async def test_correct_mode_applies_corrections_and_says_so(make_proxy, page):
    proxy = await open_ui(make_proxy, page, token_rate=200.0)
    await ask(page, mode="correct")
    await finished(page)
    assert proxy.upstream.requests[-1].get("factcheck") is None  # stripped by the proxy
    bad = page.locator('#answer .sentence[data-verdict="contradictory"]')
    assert await bad.get_attribute("data-outcome") == "corrected"
    assert await bad.locator(".edit.applied del").text_content() == "1905"
    assert await bad.locator(".edit.applied ins").text_content() == "1903"
    struck = await bad.locator("del").evaluate("e => getComputedStyle(e).textDecorationLine")
    assert "line-through" in struck
    assert await page.locator("#answer .suggestion").count() == 0
    received = page.locator("#received")
    assert await received.get_attribute("data-mode") == "correct"
    assert await received.get_attribute("data-corrected") == "1"
    assert "1 correction applied" in await received.text_content()
    assert await page.locator("#raw-text").text_content() == ANSWER.replace("1905", "1903")
    row = page.locator('#report-rows tr[data-index="1"]')
    assert "in 1903." in await row.locator(".sentence-text").text_content()  # the text the client got
    assert "corrected" in await row.text_content()
    await bad.click()
    assert "Corrections applied" in await text(page, "#details-body")
    meta = await text(page, "#answer-meta")
    assert "first text" in meta and "first checked sentence" in meta  # correct mode holds the sentences
    await last_look(page, "correct")


async def test_block_mode_stops_before_the_contradicted_sentence_and_says_so(make_proxy, page):
    await open_ui(make_proxy, page, token_rate=200.0)
    await ask(page, mode="block")
    await finished(page, "blocked")
    assert await page.locator("#raw-text").text_content() == ANSWER[: ANSWER.index("She won")]
    note = await text(page, '#answer .ending[data-ending="blocked"]')
    assert "judged contradictory" in note and "in 1905." in note and "withheld" in note
    received = page.locator("#received")
    assert await received.get_attribute("data-mode") == "block"
    assert "withheld" in await received.text_content()
    assert await page.locator("#answer .sentence").count() == 1  # the one sentence the client received
    await last_look(page, "block")


class FlaggingChecker(ScriptedChecker):
    """Correct mode as the pipeline does it when the edit gate refuses: contradicted, the fix
    proposed in the tag, no edit applied, the sentence sent as written."""

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        report = await super().check(sentence, context)
        if report.verdict.label != "contradictory":
            return report
        revision = Revision(status="flagged", reason="the edited sentence is not entailed by the evidence",
                            suggested=sentence.text.replace("1905", "1903"))
        return report.model_copy(update={"edits": [], "corrected_text": None, "revision": revision})


async def test_correct_mode_says_when_a_correction_was_not_applied(make_proxy, page):
    await open_ui(make_proxy, page, checker=FlaggingChecker(FIXES), token_rate=200.0)
    await ask(page, mode="correct")
    await finished(page)
    bad = page.locator('#answer .sentence[data-verdict="contradictory"]')
    assert await bad.get_attribute("data-outcome") == "suggested"
    assert await bad.locator(".edit.suggested mark").text_content() == "1905"
    assert await page.locator("#answer del").count() == 0
    received = page.locator("#received")
    assert await received.get_attribute("data-corrected") == "0"
    assert "no correction applied" in await received.text_content()
    assert "sent as written (not applied)" in await received.text_content()
    assert await page.locator("#raw-text").text_content() == ANSWER  # the client got it as written
    await bad.click()
    details = await text(page, "#details-body")
    assert "not entailed by the evidence" in details and "Proposed sentence (not applied)" in details
    await last_look(page, "correct-flagged")


async def test_off_mode_passes_the_text_and_the_mode_is_remembered(make_proxy, page):
    await open_ui(make_proxy, page, token_rate=200.0)
    await ask(page, mode="off")
    await finished(page)
    assert await page.locator("#answer").text_content() == ANSWER
    assert await page.locator("#answer .sentence").count() == 0
    assert "Nothing was checked" in await text(page, "#received")
    await page.reload()
    await page.wait_for_selector('#status[data-state="open"]')
    assert await page.is_checked('input[name="mode"][value="off"]')
    assert page.problems == []


@pytest.mark.parametrize("mode", ["annotate", "correct"])
@pytest.mark.parametrize(("topic", "question"), [("curie", "Who was Marie Curie?"),
                                                  ("apollo", "Tell me about the first Moon landing.")])
async def test_demo_answers(make_proxy, page, topic, question, mode):
    """The demo upstream's Curie and Apollo answers, as a new user sees them."""
    await open_ui(make_proxy, page, checker=DemoChecker(), answers=DemoAnswers.load(), token_rate=300.0)
    await ask(page, question, mode=mode)
    await finished(page)
    answer = page.locator("#answer")
    bad = answer.locator('.sentence[data-verdict="contradictory"]')
    assert await bad.count() == 1
    if mode == "correct":
        assert await bad.locator(".edit.applied ins").count() == 1
        assert await answer.locator(".suggestion").count() == 0
    else:
        assert await bad.locator(".edit.suggested .suggestion").count() == 1
        assert await answer.locator("del").count() == 0
    rows = page.locator("#report-rows tr")
    sentences = await answer.locator(".sentence").count()
    assert await rows.count() == sentences
    for i in range(await rows.count()):  # the table names each sentence, not only a number
        cell = (await rows.nth(i).locator(".sentence-text").text_content() or "").strip()
        assert len(cell) > 10 and cell in await page.locator("#raw-text").text_content()
    if topic == "apollo":
        assert await answer.locator("h2").text_content() == "Apollo 11"  # Markdown, not "## Apollo 11"
        assert "##" not in await answer.text_content()
        opinion = answer.locator('.sentence:has-text("most impressive")')
        # One verdict, one explained tag: not "extrapolatory" + "unverifiable" + "unverified".
        assert await opinion.get_attribute("data-verdict") == "skipped"
        assert await opinion.locator(".badge").count() == 1
        assert await opinion.locator(".badge").text_content() == "subjective"
        assert "an opinion, not a fact" in await opinion.locator(".badge").get_attribute("title")
        assert "unverif" not in (await opinion.text_content()).lower()
        assert "skipped: subjective" in await rows.nth(sentences - 1).text_content()
    else:
        unsupported = answer.locator('.sentence:has-text("only person")')
        assert await unsupported.get_attribute("data-verdict") == "extrapolatory"
        assert await unsupported.locator(".badge").count() == 1
        badge = unsupported.locator(".badge.fava-unverifiable")
        assert "no passage found can confirm or refute it" in await badge.get_attribute("title")
        assert "not supported" in await unsupported.get_attribute("title")
    await last_look(page, f"{topic}-{mode}")


class TimedChecker(ScriptedChecker):
    """Sentence i takes ``seconds[i]`` and reports it as its one stage: bars on one scale
    must be as long as each other as their times are."""

    seconds = (0.04, 0.32, 0.08)

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        seconds = self.seconds[sentence.index % len(self.seconds)]
        await asyncio.sleep(seconds)
        report = await super().check(sentence, context)
        return report.model_copy(update={"timings_ms": {"search": seconds * 1000.0}})


async def test_sentence_table_on_one_time_scale_with_wall_times_and_ttft(make_proxy, page):
    await open_ui(make_proxy, page, checker=TimedChecker(), token_rate=100.0)
    await ask(page, mode="annotate")
    await finished(page)
    rows = page.locator("#report-rows tr")
    assert await rows.count() == 3
    assert await rows.nth(0).locator(".sentence-text").text_content() == "Marie Curie was born in Warsaw in 1867."
    widths = [(await rows.nth(i).locator(".tl-stages").bounding_box())["width"] for i in range(3)]
    lanes = [(await rows.nth(i).locator(".timeline").bounding_box())["width"] for i in range(3)]
    assert max(lanes) - min(lanes) < 1  # every row spans the same axis ...
    assert widths[1] / widths[0] == pytest.approx(8.0, rel=0.15)  # ... so 320 ms is 8 times 40 ms
    assert widths[1] / widths[2] == pytest.approx(4.0, rel=0.15)
    assert widths[1] < 0.9 * lanes[1]  # not stretched to the full width
    scale = float(await page.locator("#axis").get_attribute("data-scale-ms"))
    for i in range(3):
        row = rows.nth(i)
        wall = float(await row.get_attribute("data-wall-ms"))
        stages = float(await row.get_attribute("data-stages-ms"))
        assert stages <= wall + 5 <= scale + 5  # the page waited at least the check's own time
        times = await row.locator(".times").text_content()
        assert "wall" in times and "stages" in times and "other" in times
    ttft = float(await page.locator("#answer-meta").get_attribute("data-ttft-ms"))
    assert 0 < ttft < scale
    assert re.search(r"first text \d+(\.\d)? ms after Ask", await text(page, "#answer-meta"))
    await page.locator("#reports").screenshot(path=shot("timings"))
    assert page.problems == []


class SlowOnOneChecker(ScriptedChecker):
    """Never finishes the check of the sentence about 1934: it times out."""

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        if "1934" in sentence.text:
            await asyncio.sleep(30)
        report = await super().check(sentence, context)
        return report.model_copy(update={"timings_ms": {"search": 3.0}})


async def test_a_timed_out_sentence_says_timed_out(make_proxy, page):
    await open_ui(make_proxy, page, checker=SlowOnOneChecker(), token_rate=200.0, **{"check.sentence_budget_s": 0.4})
    await ask(page, mode="annotate")
    await finished(page)
    late = page.locator('#report-rows tr[data-timed-out="true"]')
    assert await late.count() == 1
    assert "She died in 1934." in await late.locator(".sentence-text").text_content()
    assert "unverified: timed out" in await late.text_content()
    assert "checker: timed out" in await late.locator(".times").text_content()
    assert await late.locator(".tl-wait.timeout").count() == 1
    assert "0.0 ms" not in await late.text_content()
    sentence = page.locator('#answer .sentence[data-timed-out="true"]')
    assert await sentence.locator(".badge.status-unverified").text_content() == "timed out"
    await sentence.click()
    timings = await page.locator("#details-body table.timings").text_content()
    assert "timed out" in timings and "0.0 ms" not in timings
    await last_look(page, "timeout")


async def test_legend_explains_verdicts_tags_and_corrections_in_plain_words(make_proxy, page):
    await open_ui(make_proxy, page)
    legend = page.locator("#legend")
    assert await legend.is_visible()
    words = await legend.text_content()
    for term, meaning in [
        ("attributable", "a passage found says the same thing"),
        ("extrapolatory", "neither confirm nor contradict"),
        ("contradictory", "a passage found says otherwise"),
        ("unverified", "timed out"),
        ("skipped", "not a factual claim"),
        ("entity", "a wrong name, number or date"),
        ("subjective", "an opinion"),
        ("unverifiable", "Not the same as unverified"),
        ("invented", "names something no source knows"),
        ("applied", "your client received the green text"),
        ("suggested", "your client received the underlined text as the model wrote it"),
    ]:
        assert term in words and meaning in words, term
    applied = legend.locator(".edit.applied del")
    assert "line-through" in await applied.evaluate("e => getComputedStyle(e).textDecorationLine")
    suggested = legend.locator(".edit.suggested mark")
    assert "line-through" not in await suggested.evaluate("e => getComputedStyle(e).textDecorationLine")
    await legend.screenshot(path=shot("legend"))


MARKDOWN = """# Radium notes

Some **bold** words, an *emphasis* and `x = 1` in code.

- first item
- second item

1. one
2. two

```
print("<b>not bold</b>")
```

An attack <img src=x onerror="window.pwned=1"> and <script>window.pwned=2</script> in the text."""


def test_app_js_never_parses_strings_as_html():
    modules = sorted(UI_DIR.glob("*.js"))  # app.js and the modules it imports: the whole UI
    assert len(modules) > 1 and UI_DIR / "app.js" in modules
    for module in modules:
        source = module.read_text(encoding="utf-8")
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "DOMParser",
                     "createContextualFragment", "eval(", "new Function"):
            assert sink not in source, f"{module.name}: {sink}"


async def test_markdown_is_rendered_and_untrusted_text_stays_text(make_proxy, page):
    answers = DemoAnswers(answers=[{"keywords": ["radium"], "answer": MARKDOWN}])
    await open_ui(make_proxy, page, checker=ScriptedChecker(), answers=answers, token_rate=300.0)
    await ask(page, "Notes on radium", mode="annotate")
    await finished(page)
    answer = page.locator("#answer")
    assert await answer.locator("h1").text_content() == "Radium notes"
    assert await answer.locator("strong").text_content() == "bold"
    assert await answer.locator("em").text_content() == "emphasis"
    assert await answer.locator("p code").text_content() == "x = 1"
    assert await answer.locator("ul > li").all_text_contents() == ["first item", "second item"]
    assert await answer.locator("ol > li").all_text_contents() == ["one", "two"]
    assert await answer.locator("pre code").text_content() == 'print("<b>not bold</b>")'
    shown = await answer.text_content()
    for raw in ("# Radium", "**", "```"):
        assert raw not in shown
    # The model's markup is shown literally and nothing of it runs.
    assert '<img src=x onerror="window.pwned=1">' in shown and "<script>window.pwned=2</script>" in shown
    assert await answer.locator("img, script, b").count() == 0
    assert await page.evaluate("window.pwned") is None
    assert await page.locator("#raw-text").text_content() == MARKDOWN
    await last_look(page, "markdown")


async def test_sources_are_titles_links_for_web_pages_and_corpus_names_otherwise(make_proxy, page):
    await open_ui(make_proxy, page, token_rate=200.0)
    await ask(page, mode="annotate")
    await finished(page)
    await page.locator('#answer .sentence[data-verdict="contradictory"]').click()
    body = page.locator("#details-body")
    await body.wait_for(state="visible")
    passages = body.locator(".passage")
    assert await passages.count() == 3
    corpus, web, sneaky = passages.nth(0), passages.nth(1), passages.nth(2)
    assert await corpus.locator("span.passage-title").text_content() == "Marie Curie"
    name = corpus.locator(".source-name")
    assert await name.text_content() == "people/marie-curie.md"
    assert await name.get_attribute("data-where") == "corpus"  # the stylesheet says "corpus: "
    assert await corpus.locator("a").count() == 0
    assert HOSTILE in await corpus.locator("blockquote").text_content()  # shown as text ...
    assert await body.locator("img").count() == 0  # ... never parsed as markup
    link = web.locator("a.passage-title")
    assert await link.text_content() == "Curie on the web"
    assert await link.get_attribute("href") == "https://example.org/curie"
    assert await link.get_attribute("target") == "_blank"
    assert await link.get_attribute("rel") == "noopener noreferrer"
    assert await sneaky.locator("span.passage-title").text_content() == "Sneaky link"
    assert await page.locator('a[href^="javascript"]').count() == 0
    assert await page.title() != "pwned"
    await last_look(page, "sources")


async def test_stop_shows_the_answer_was_stopped(make_proxy, page):
    await open_ui(make_proxy, page)
    await page.click("#advanced summary")
    await page.fill("#extra", '{"mock": {"text": "%s", "hang_after": 12}}' % ANSWER)
    await ask(page)
    await page.wait_for_function("() => document.querySelector('#answer').textContent.length > 5")
    await page.click("#stop")
    await finished(page, "stopped", timeout=10_000)
    note = page.locator("#answer .ending-stopped")
    assert await note.is_visible()
    assert "Stopped" in await note.text_content() and "incomplete" in await note.text_content()
    assert "You stopped it" in await text(page, "#received")
    assert await page.is_enabled("#send")
    await last_look(page, "stopped")


async def test_upstream_error_and_bad_options(make_proxy, page):
    proxy = await open_ui(make_proxy, page)
    await page.click("#advanced summary")
    await page.fill("#extra", '{"mock": {"text": "x", "error_status": 503}}')
    await ask(page)
    await finished(page, "failed", timeout=10_000)
    assert "scripted failure 503" in await text(page, "#error")
    assert "scripted failure 503" in await text(page, "#answer .ending-failed")
    await page.fill("#extra", "{not json")
    await ask(page)
    assert "Request options" in await text(page, "#error")
    assert len(proxy.upstream.requests) == 1
    await last_look(page, "error")


async def test_an_oversized_message_is_refused_with_the_servers_message(make_proxy, page):
    limit = 4096
    proxy = await open_ui(make_proxy, page, **{"server.max_body_bytes": limit})
    assert await page.locator("body").get_attribute("data-max-message-bytes") == str(limit)
    big = "x" * (limit + 500)
    async with aiohttp.ClientSession() as session:  # what the server says over HTTP
        async with session.post(f"{proxy.url}/chat/completions",
                                json={"messages": [{"role": "user", "content": big}]}) as response:
            assert response.status == 413
            said = (await response.json())["error"]["message"]
    await ask(page, big)
    error = page.locator("#error")
    await error.wait_for(state="visible")
    assert (await error.text_content()).startswith(said)
    assert "Nothing was sent" in await error.text_content()
    assert await error.get_attribute("data-kind") == "too-large"
    assert proxy.upstream.requests == []
    assert await page.get_attribute("#status", "data-state") == "open"  # still connected
    await page.screenshot(path=shot("too-large"), full_page=True)

    # A page that does not know the limit sends it: the server closes the socket (1009), and
    # the page says why instead of "connection lost".
    await page.evaluate("document.body.dataset.maxMessageBytes = ''")
    await ask(page, big)
    await finished(page, "refused", timeout=10_000)
    shown = await error.text_content()
    assert "too large" in shown and "1009" in shown and "Connection lost" not in shown
    assert proxy.upstream.requests == []
    await page.wait_for_selector('#status[data-state="open"]', timeout=10_000)  # reconnects
    assert page.problems == []
