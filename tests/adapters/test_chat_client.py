"""The pipeline's LLM chat client (``adapters.chat_client``) against a loopback OpenAI-compatible
server: samples and headers, errors, and the client built from settings."""

from __future__ import annotations

import pytest

from adapters.chat_client import ChatClient, LLMError
from middleware.settings import load_settings
from tests.support.pipeline_doubles import LoopbackChat


async def test_chat_client_samples_and_headers() -> None:
    async with LoopbackChat(lambda messages, i: f"answer {i}", choices_per_call=1) as server:
        async with ChatClient(server.base_url, api_key="k", model="m", n=3) as client:
            texts = await client.complete([{"role": "user", "content": "hi"}])
    assert sorted(texts) == ["answer 0", "answer 1", "answer 2"]
    assert len(server.requests) == 3 and server.requests[0]["n"] == 3 and server.requests[1]["n"] == 1
    assert server.headers[0]["Authorization"] == "Bearer k" and server.requests[0]["model"] == "m"


async def test_chat_client_errors() -> None:
    client = ChatClient("http://127.0.0.1:9/v1", timeout_s=2)
    with pytest.raises(LLMError):
        await client.complete([{"role": "user", "content": "hi"}])
    await client.close()


def test_chat_client_from_settings() -> None:
    settings = load_settings(
        **{
            "pipeline.llm_url": "http://127.0.0.1:1/v1",
            "pipeline.llm_model": "judge",
            "upstream.api_key": "up",
        }
    )
    client = ChatClient.from_settings(settings)
    assert (
        client.url == "http://127.0.0.1:1/v1/chat/completions"
        and client.model == "judge"
        and client.api_key == "up"
    )
