"""Prometheus metrics: the one place every metric of the process is declared.

Stage names for ``STAGE_LATENCY``: segment, claims, questions, search, fetch, rerank,
verify, edit, report, memory, check (the whole per-sentence check)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""Set (to an empty directory) before this module is imported, every process of the proxy
writes its metrics there and ``exposition`` merges them (``serve --workers N`` sets it)."""
if os.environ.get(MULTIPROCESS_ENV):  # prometheus_client opens its files there at import
    Path(os.environ[MULTIPROCESS_ENV]).mkdir(parents=True, exist_ok=True)

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.5, 5.0, 10.0)

STAGE_LATENCY = Histogram(
    "factcheck_stage_latency_seconds", "Latency of one pipeline stage", ["stage"], buckets=_LATENCY_BUCKETS
)
TIME_TO_FIRST_TOKEN = Histogram(
    "factcheck_time_to_first_token_seconds",
    "Time from request to the first content byte sent to the client",
    ["mode"],
    buckets=_LATENCY_BUCKETS,
)
ADDED_LATENCY = Histogram(
    "factcheck_added_latency_seconds",
    "Time the proxy added to a request: client-side end minus upstream end",
    ["mode"],
    buckets=_LATENCY_BUCKETS,
)
SENTENCES = Counter(
    "factcheck_sentences_total", "Checked sentences by verdict, and for unverified ones why "
    "(reason: timeout, error, overload, no_evidence, no_checker, other; empty for a verdict)", ["verdict", "reason"]
)
SENTENCE_STAGE_LATENCY = Histogram(
    "factcheck_sentence_stage_seconds", "Time one sentence's check spent in a stage, summed over its calls "
    "(search and rerank run once per question)", ["stage"], buckets=_LATENCY_BUCKETS
)
CHECK_SLOT_WAIT = Histogram(
    "factcheck_check_slot_wait_seconds", "Time a sentence's check waited for a global check slot "
    "(check.max_checks_global)", buckets=_LATENCY_BUCKETS
)
SHED_CHECKS = Counter(
    "factcheck_shed_checks_total", "Checks reported unverified (overload) at once because the queue for a "
    "check slot would not let them finish inside the budget"
)
HTTP_REQUESTS = Counter(
    "factcheck_http_requests_total", "Requests to the proxied endpoints (chat, responses, messages, models) and "
    "websocket answers (ws), "
    "once each, by outcome: ok, refused (4xx from the proxy), upstream_error (before or during the answer), "
    "client_gone (the client closed the connection or cancelled before its answer was complete: no failure), "
    "internal", ["endpoint", "outcome"]
)
BLOCKS = Counter(
    "factcheck_blocks_total", "Answers block mode stopped, by the verdict of the sentence that stopped them "
    "(contradictory, extrapolatory with check.block_extrapolatory)", ["verdict"]
)
for _verdict in ("contradictory", "extrapolatory"):
    BLOCKS.labels(verdict=_verdict)
UNVERIFIED_REASONS = ("timeout", "overload", "error", "no_evidence", "no_checker", "other")
OUTCOMES = ("ok", "refused", "upstream_error", "client_gone", "internal")
# Counters start at 0 for every known label set: a series born at its first increment has no
# earlier sample, so rate() and increase() would miss that first failure.
for _endpoint in ("chat", "responses", "messages", "models", "ws"):
    for _outcome in OUTCOMES:
        HTTP_REQUESTS.labels(endpoint=_endpoint, outcome=_outcome)
for _verdict in ("attributable", "contradictory", "extrapolatory", "skipped"):
    SENTENCES.labels(verdict=_verdict, reason="")
for _reason in UNVERIFIED_REASONS:
    SENTENCES.labels(verdict="unverified", reason=_reason)

UPSTREAM_LATENCY = Histogram(
    "factcheck_upstream_response_seconds", "Time from sending a request upstream to its response headers "
    "(stream) or its whole body (non-stream)", ["stream"], buckets=_LATENCY_BUCKETS
)
UPSTREAM_ERRORS = Counter("factcheck_upstream_errors_total", "Upstream failures", ["kind"])
REQUEST_ERRORS = Counter("factcheck_request_errors_total", "Requests refused by the proxy", ["status"])
ACTIVE_STREAMS = Gauge("factcheck_active_streams", "Streams being served now", multiprocess_mode="livesum")
REQUESTS = Counter("factcheck_requests_total", "Chat completion requests", ["mode", "stream"])
CONNECTIONS_CLOSED = Counter(
    "factcheck_connections_closed_total", "Connections the server closed for holding it without a complete request: "
    "header_timeout (no complete request head in server.header_timeout_s), body_timeout (a body slower than "
    "server.body_min_rate_bytes_s or past server.body_timeout_s: answered 408), idle_cap (past "
    "server.max_idle_connections)", ["reason"]
)
for _reason in ("header_timeout", "body_timeout", "idle_cap"):
    CONNECTIONS_CLOSED.labels(reason=_reason)

# Model runtime
BATCH_SIZE = Histogram(
    "factcheck_batch_size", "Items per model inference", ["model"], buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
)
QUEUE_WAIT = Histogram(
    "factcheck_batch_queue_wait_seconds", "Time an item waited for its batch", ["model"], buckets=_LATENCY_BUCKETS
)
INFERENCE_TIME = Histogram(
    "factcheck_inference_seconds", "Time of one model inference", ["model"], buckets=_LATENCY_BUCKETS
)

# Evidence
PROVIDER_ERRORS = Counter("factcheck_provider_errors_total", "Search provider failures", ["provider", "kind"])
CACHE_REQUESTS = Counter("factcheck_cache_requests_total", "Cache lookups", ["cache", "result"])

# Memory-hallucination check
MEMORY_CHECK_TOKENS = Counter("factcheck_memory_check_tokens_total", "Upstream tokens spent on closed-book answers")
MEMORY_CHECK_LATENCY = Histogram(
    "factcheck_memory_check_seconds", "Time of the closed-book upstream call", buckets=_LATENCY_BUCKETS
)


@contextmanager
def timed(stage: str, timings: dict[str, float] | None = None) -> Iterator[None]:
    """Time a block into ``STAGE_LATENCY{stage}`` and, if given, ``timings[stage]`` (ms, summed)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - t0
        STAGE_LATENCY.labels(stage=stage).observe(elapsed)
        if timings is not None:
            timings[stage] = timings.get(stage, 0.0) + elapsed * 1000.0


def exposition() -> bytes:
    """The text ``/metrics`` serves: this process's metrics, or every worker's merged."""
    if os.environ.get(MULTIPROCESS_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(REGISTRY)
