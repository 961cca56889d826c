"""The chat completions endpoint family, in the shape of vLLM's OpenAI front door.

- ``protocol``: the family's wire models, request to events (``/openapi.json`` is generated from
  them; the shared reports are ``middleware.types``, the error format ``middleware.errors``);
- ``parsing``: reading a request body into the protocol's models (limits, JSON hygiene, mode);
- ``chunks``: the OpenAI ``chat.completion.chunk`` as the proxy reads and writes it;
- ``wire``: reports as they leave (each passage's text once per response, public source names);
- ``grounding_prompt``: the according-to instruction a request may carry to the upstream;
- ``checked_stream``: the transport-neutral checked stream (modes, sentence bookkeeping,
  summary); knows nothing of HTTP; ``typed_events``: upstream streams of typed events (the
  Responses and Messages APIs) read as an answer source;
- ``low_priority``: work the event loop does after its relaying (annotate mode's reading);
- ``serving``: the chat service that opens a checked stream per request;
- ``face_service`` / ``face_router``: what the front doors of the other APIs (``responses``,
  ``messages``) share: the request read as chat completions, and the HTTP side;
- ``limits``: the rate limits of the HTTP endpoints and the websocket; ``api_router``: ``POST /v1/chat/completions`` (HTTP
  and SSE); ``ws_router``: ``GET /v1/ws`` (the same events as JSON messages over a websocket).

Imports go one way, routers -> services -> checked stream (with chunks, wire, parsing and
grounding_prompt beside it) -> typed events -> protocol; the order is an import-linter
contract (``pyproject.toml``).
"""
