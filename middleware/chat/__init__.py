"""The chat completions endpoint family, in the shape of vLLM's OpenAI front door.

- ``protocol``: every wire model, request to error body (``/openapi.json`` is generated from them);
- ``parsing``: reading a request body into the protocol's models (limits, JSON hygiene, mode);
- ``chunks``: the OpenAI ``chat.completion.chunk`` as the proxy reads and writes it;
- ``wire``: reports as they leave (each passage's text once per response, public source names);
- ``serving``: the transport-neutral checked stream (modes, sentence bookkeeping, summary) and
  the chat service that opens it; knows nothing of HTTP;
- ``api_router``: ``POST /v1/chat/completions`` (HTTP and SSE only);
- ``ws_router``: ``GET /v1/ws`` (the same events as JSON messages over a websocket).

Imports go one way: routers → serving → chunks/wire/parsing → protocol → ``middleware.types``.
"""
