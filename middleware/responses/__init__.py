"""``POST /v1/responses``: the OpenAI Responses API, in the shape of the chat endpoint family.

- ``protocol``: its wire models, request to error event (in ``/openapi.json``);
- ``events``: its typed events as an ``AnswerSource``, and the proxy's own events;
- ``serving``: the face over the chat service (``middleware.chat.face_service``);
- ``api_router``: HTTP and SSE only.

Imports go one way: api_router → serving → events → protocol.
"""
