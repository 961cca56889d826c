"""The UI at ``/`` end to end in a real headless Chromium (Debian's /usr/bin/chromium, driven by
Playwright's Python client): the page loads, an answer streams in over the websocket, a
contradicted sentence shows its FAVA tag and correction, evidence opens on click and stays
text. Screenshots go to test-artifacts/ (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.demo_upstream import DemoAnswers
from middleware.types import CheckContext, Passage, Sentence, SentenceReport
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
    """The scripted verdicts plus evidence (one passage with markup in its text and one with
    a javascript: URL: both must reach the page as inert text) and stage timings."""

    async def check(self, sentence: Sentence, context: CheckContext) -> SentenceReport:
        report = await super().check(sentence, context)
        evidence = [
            Passage(id="p1", text=HOSTILE, provider="index", source="people/marie-curie.md", title="Marie Curie",
                    url="https://example.org/curie", score=0.91),
            Passage(id="p2", text="A second source.", provider="web", source="javascript:alert(1)",
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


async def open_ui(make_proxy, page, token_rate: float = 40.0):
    proxy = await make_proxy(EvidenceChecker(FIXES))
    proxy.upstream.answers = DemoAnswers(answers=[{"keywords": ["curie"], "answer": ANSWER}])
    proxy.upstream.default_rate = token_rate
    await page.goto(proxy.url.removesuffix("/v1") + "/")
    await page.wait_for_selector('#status[data-state="open"]', timeout=10_000)
    return proxy


async def ask(page, question: str = "Who was Marie Curie?") -> None:
    await page.fill("#question", question)
    await page.press("#question", "Enter")


def shot(name: str) -> str:
    return str(ARTIFACTS / f"ui-{name}.png")


async def test_answer_streams_and_contradiction_shows_tag_correction_and_evidence(make_proxy, page):
    await open_ui(make_proxy, page)
    assert await page.title() == "factcheck: streaming fact-checking"
    assert await page.input_value("#model") == "factcheck-demo"  # from /v1/models
    await ask(page)

    # Part of the answer is on screen while the rest is still streaming.
    await page.wait_for_function(
        "() => document.querySelector('#answer').dataset.state === 'streaming'"
        " && document.querySelector('#answer').textContent.length > 10"
    )
    await page.screenshot(path=shot("streaming"))
    await page.wait_for_selector('#answer[data-state="done"]', timeout=15_000)

    sentences = page.locator("#answer .sentence")
    assert await sentences.count() == 3
    bad = page.locator('#answer .sentence[data-verdict="contradictory"]')
    assert await bad.count() == 1
    assert await bad.locator(".fava-entity del").text_content() == "1905"
    assert await bad.locator(".fava-entity ins").text_content() == "1903"
    struck = await bad.locator("del").evaluate("e => getComputedStyle(e).textDecorationLine")
    assert "line-through" in struck
    assert await page.locator('#answer .sentence[data-verdict="attributable"]').count() == 2
    assert "verdicts" not in await page.locator("#summary").text_content()  # rendered, not raw JSON
    assert "contradictory: 1" in await page.locator("#summary").text_content()
    assert await page.locator("#report-rows tr").count() == 3

    await bad.click()
    details = page.locator("#details")
    await details.wait_for(state="visible")
    body = details.locator("#details-body")
    assert HOSTILE in await body.text_content()  # shown as text ...
    assert await body.locator("img").count() == 0  # ... never parsed as markup
    assert await page.title() != "pwned"
    assert await body.locator('a[href="https://example.org/curie"]').count() == 1
    assert await body.locator('a[href^="javascript"]').count() == 0
    timings = await body.locator("table.timings").text_content()
    assert "verify" in timings and "7.3 ms" in timings and "21 ms" in timings  # total of the stages
    await page.screenshot(path=shot("contradiction"), full_page=True)
    assert page.problems == []


async def test_correct_mode_and_off_mode(make_proxy, page):
    proxy = await open_ui(make_proxy, page, token_rate=200.0)
    await page.check('input[name="mode"][value="correct"]')
    await ask(page)
    await page.wait_for_selector('#answer[data-state="done"]', timeout=15_000)
    assert proxy.upstream.requests[-1].get("factcheck") is None  # stripped by the proxy
    bad = page.locator('#answer .sentence[data-verdict="contradictory"]')
    assert await bad.locator("del").text_content() == "1905"
    assert await bad.locator("ins").text_content() == "1903"
    await page.screenshot(path=shot("correct"), full_page=True)

    await page.check('input[name="mode"][value="off"]')
    await ask(page)
    await page.wait_for_selector('#answer[data-state="done"]', timeout=15_000)
    assert await page.locator("#answer").text_content() == ANSWER
    assert await page.locator("#answer .sentence").count() == 0
    await page.reload()
    await page.wait_for_selector('#status[data-state="open"]')
    assert await page.is_checked('input[name="mode"][value="off"]')  # the choice is remembered
    assert page.problems == []


async def test_stop_and_upstream_error(make_proxy, page):
    proxy = await open_ui(make_proxy, page)
    await page.click("#advanced summary")
    await page.fill("#extra", '{"mock": {"text": "%s", "hang_after": 12}}' % ANSWER)
    await ask(page)
    await page.wait_for_function("() => document.querySelector('#answer').textContent.length > 5")
    await page.click("#stop")
    await page.wait_for_selector('#answer[data-state="done"]', timeout=10_000)
    assert await page.is_enabled("#send")

    await page.fill("#extra", '{"mock": {"text": "x", "error_status": 503}}')
    await ask(page)
    await page.wait_for_selector('#answer[data-state="done"]', timeout=10_000)
    assert "scripted failure 503" in await page.locator("#error").text_content()
    await page.fill("#extra", "{not json")
    await ask(page)
    assert "Request options" in await page.locator("#error").text_content()
    assert len(proxy.upstream.requests) == 2
    await page.screenshot(path=shot("error"), full_page=True)
    assert page.problems == []
