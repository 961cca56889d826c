"""One LLM API in the terms of another: chat completions, the OpenAI Responses API and the
Anthropic Messages API, each translated to and from chat completions (the neutral form; any
other pair goes through it).

- ``requests``: request bodies;
- ``streams``: streamed events, one stateful translator per stream;
- ``completions``: non-stream answers;
- ``upstream``: an ``Upstream`` of one API seen as an upstream of another (the face's own API).
- ``via_chat``: the route every translation takes, through chat completions.

Pure data over dicts: nothing here knows HTTP, the checker or the faces. A face whose upstream
speaks its own API uses none of it: its upstream's bytes pass through untouched.
"""
