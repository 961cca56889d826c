"""The Messages face over the chat service: its request model and its events."""

from __future__ import annotations

from middleware.chat.face_service import ApiFaceService
from middleware.interfaces import UpstreamStream
from middleware.messages.events import MessageEvents
from middleware.messages.protocol import MessagesRequest


class MessagesService(ApiFaceService[MessageEvents]):
    API = "messages"
    REQUEST = MessagesRequest

    def source(self, opened: UpstreamStream) -> MessageEvents:
        return MessageEvents(opened, self.settings.upstream.max_event_bytes)
