"""The composition root: the one engine package that imports ``adapters/``, and the one
assembly path. This module builds the proxy (``build_app``), its checker and its upstream;
``pipeline`` assembles the fact-checking pipeline, ``backends`` its backends by name (verifiers,
question generators, decontextualisers, models) and ``editor`` the editors and their gate.

It builds the configured adapters (the upstream LLM client, the LLM backends' chat client, the
web search providers, the demo LLM, the browser UI) and hands them to the engine, which sees
them only through the protocols of ``middleware.interfaces``. The command line and the tests
build the proxy here; an import-linter contract (``pyproject.toml``) keeps every other engine
module off ``adapters``.
"""

from __future__ import annotations

from aiohttp import web

from middleware.checkers.pool import WorkerPool
from middleware.checking import CheckRunner, NoChecker
from middleware.interfaces import Checker, Providers, Upstream
from middleware.server.app import create_app
from middleware.settings import Settings


def providers() -> Providers:
    """The adapters the engine's builders may need: the chat client for LLM backends, the web
    evidence (search providers, de-duplication, page fetching) and the user's retriever."""
    from adapters.chat_client import ChatClient
    from adapters.search import RetrieverSource, build_web_sources

    return Providers(chat_model=ChatClient.from_settings, web_sources=build_web_sources,
                     retriever_source=RetrieverSource.from_settings)


def build_checker(settings: Settings) -> Checker:
    """The configured checker: the fact-checking pipeline, or ``NoChecker`` for 'none'."""
    if settings.check.checker == "none":
        return NoChecker()
    return _pipeline(settings)


def pipeline_checker(settings: Settings) -> Checker:
    """The pipeline for the command line, with the demo index built first when it is searched."""
    from middleware.evidence.index import prepare_demo_index

    prepare_demo_index(settings)
    return _pipeline(settings)


CLI_SENTENCE_BUDGET_S = 30.0
"""A sentence's budget on the command line (``check``, ``eval-grounding``): no stream is waiting."""


def command_line_runner(settings: Settings) -> CheckRunner:
    """The pipeline's runner for the command line: a check there is not racing a stream, it gets room."""
    return CheckRunner(pipeline_checker(settings),
                       settings.check.model_copy(update={"sentence_budget_s": CLI_SENTENCE_BUDGET_S}))


def _pipeline(settings: Settings) -> Checker:
    """The fact-checking pipeline (imported here: a relay whose checks run in workers never
    loads it). With the models on the Ray Serve tier (``runtime.backend: ray``), a check that
    a tier failure touched is reported ``unverified`` (``checkers.tier_guard.TierGuardedChecker``)."""
    from middleware.composition.pipeline import build_pipeline_checker

    checker = build_pipeline_checker(settings, providers())
    if settings.runtime.backend != "ray":
        return checker
    from middleware.checkers.tier_guard import TierGuardedChecker

    return TierGuardedChecker(checker)


def build_upstream(settings: Settings) -> Upstream:
    from adapters.upstream import UpstreamClient

    return UpstreamClient(settings.upstream, trust_env=settings.outbound.trust_env,
                          max_response_bytes=settings.outbound.max_response_bytes)


def build_app(settings: Settings, checker: Checker | None = None, upstream: Upstream | None = None) -> web.Application:
    """The proxy: the configured checker and upstream unless given (tests inject their own),
    with the browser UI. With ``check.workers``, the checks run in worker processes started
    with the app (``middleware.checkers.pool``); the relay then loads no model."""
    from adapters.ui import OPEN_PATHS, add_ui_routes

    pool = None
    if checker is None and settings.check.workers > 0 and settings.check.checker != "none":
        checker = pool = WorkerPool(settings, build_checker)
    app = create_app(settings, checker if checker is not None else build_checker(settings),
                     upstream if upstream is not None else build_upstream(settings), add_routes=add_ui_routes,
                     open_paths=OPEN_PATHS, checks_in_workers=pool is not None)
    if pool is not None:
        app.on_startup.append(lambda _: pool.start())
        app.on_cleanup.append(lambda _: pool.close())
    if settings.runtime.backend == "ray":
        app.on_cleanup.append(_close_tier_sessions)
    return app


async def _close_tier_sessions(app: web.Application) -> None:
    """The HTTP sessions to the Ray tier end with the app (``runtime.backend: ray``)."""
    from middleware.runtime.ray_client import close_remote_sessions

    await close_remote_sessions()


def demo_upstream_app(token_rate: float = 0.0) -> web.Application:
    """The built-in demo LLM (scripted answers about the demo corpus), as an aiohttp app."""
    from adapters.demo_upstream import DemoAnswers, DemoUpstream

    return DemoUpstream(DemoAnswers.load(), default_rate=token_rate).app()


def demo_questions(limit: int) -> list[str]:
    """The demo LLM's scripted questions, the first ``limit``."""
    from adapters.demo_upstream import DemoAnswers

    return [answer["question"] for answer in DemoAnswers.load().answers[:limit]]
