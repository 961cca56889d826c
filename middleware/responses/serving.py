"""The Responses face over the chat service: its request model and its events."""

from __future__ import annotations

from middleware.chat.face_service import ApiFaceService
from middleware.interfaces import UpstreamStream
from middleware.responses.events import ResponseEvents
from middleware.responses.protocol import ResponsesRequest


class ResponsesService(ApiFaceService[ResponseEvents]):
    API = "responses"
    REQUEST = ResponsesRequest

    def source(self, opened: UpstreamStream) -> ResponseEvents:
        return ResponseEvents(opened, self.settings.upstream.max_event_bytes)
