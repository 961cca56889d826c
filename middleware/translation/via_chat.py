"""The route every translation takes: from API ``source`` to chat completions, then to API
``target`` (``requests`` and ``completions`` each give their own tables of translators)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Translate = Callable[[dict[str, Any]], dict[str, Any]]


def unchanged(body: dict[str, Any]) -> dict[str, Any]:
    """Chat completions to and from itself."""
    return body


def via_chat(
    value: dict[str, Any], source: str, target: str, to_chat: Mapping[str, Translate], from_chat: Mapping[str, Translate]
) -> dict[str, Any]:
    """``value`` of API ``source`` as one of API ``target``, through chat completions (itself
    when they are the same)."""
    if source == target:
        return value
    return from_chat[target](to_chat[source](value))
