"""``POST /v1/messages``: the Anthropic Messages API, in the shape of the chat endpoint family.

- ``protocol``: its wire models, request to error body (in ``/openapi.json``);
- ``events``: its typed events as an ``AnswerSource``, and the proxy's own events;
- ``serving``: the face over the chat service (``middleware.chat.face_service``);
- ``api_router``: HTTP and SSE only; its errors in the Anthropic error format.

Imports go one way: api_router → serving → events → protocol.
"""
