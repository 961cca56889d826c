"""Fixtures of the tests of what replicas share through Redis (the evidence cache, the limiter)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.redis_server import redis_server_url


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """FACTCHECK_TEST_REDIS_URL (set by .ci/run), else a redis-server started here."""
    yield from redis_server_url()


@pytest.fixture
def prefix() -> str:
    """A key prefix of the test's own, so tests sharing one Redis never see each other's keys."""
    return f"test-{uuid.uuid4().hex[:8]}:"
