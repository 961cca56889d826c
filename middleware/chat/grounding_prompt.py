"""According-to prompting (Weller, Marone et al., 2024, QUIP-Score): an instruction that names a
trusted corpus, added to the request before it goes upstream, to steer the LLM toward text it
can quote from that corpus. The paper's form, appended to the question:

    Respond to this question using only information that can be attributed to <corpus>.

and its anti-grounding control ``Respond without using any information from <corpus> in your
response.`` (``factcheck eval-grounding`` compares the two with no instruction at all).

Pure functions over the JSON body: the body given is never changed; with no instruction to add
the serving layer forwards it as it came.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from middleware.types import GroundingPlacement, GroundingPrompt, Mode

OFF = "off"
"""The corpus name that means no instruction (``factcheck.grounding_prompt: "off"``)."""

_LEADING_ROLES = frozenset({"system", "developer"})


def grounding_instruction(corpus: str) -> str:
    """The paper's grounding prompt (its Table 2, the one used for every later model)."""
    return f"Respond to this question using only information that can be attributed to {corpus}."


def anti_grounding_instruction(corpus: str) -> str:
    """The paper's anti-grounding control for the same corpus."""
    return f"Respond without using any information from {corpus} in your response."


def is_off(corpus: str | None) -> bool:
    return corpus is None or corpus.strip().lower() == OFF


def requested_corpus(option: str | None, default: str | None, mode: Mode) -> str | None:
    """The corpus to name, or None for no instruction. The request's own
    ``factcheck.grounding_prompt`` wins, in every mode (``off``: none); else the server's
    default, which applies only when the answer is checked: off mode relays the request as it
    came, and has no summary that would report the change."""
    if option is not None:
        return None if is_off(option) else option
    if mode is Mode.OFF or is_off(default):
        return None
    return default


def with_instruction(
    body: Mapping[str, Any], instruction: str, placement: GroundingPlacement
) -> tuple[dict[str, Any], GroundingPlacement]:
    """A copy of the chat completions ``body`` with ``instruction`` added, and where it went.

    ``append``: at the end of the last user message (after a space; a multi-part content gets a
    text part of its own). ``system``: a system message of its own, after the leading system and
    developer messages. A body with no user message gets the system message whatever the
    placement. Only the messages list and the one message changed are copied."""
    messages: list[Any] = list(body.get("messages") or [])
    last_user = next((i for i in range(len(messages) - 1, -1, -1) if _role(messages[i]) == "user"), None)
    if placement == "append" and last_user is not None:
        message = dict(messages[last_user])
        message["content"] = _appended(message.get("content"), instruction)
        messages[last_user] = message
        placed: GroundingPlacement = "append"
    else:
        at = next((i for i, m in enumerate(messages) if _role(m) not in _LEADING_ROLES), len(messages))
        messages.insert(at, {"role": "system", "content": instruction})
        placed = "system"
    return {**body, "messages": messages}, placed


def add_grounding(
    body: Mapping[str, Any], corpus: str, placement: GroundingPlacement
) -> tuple[dict[str, Any], GroundingPrompt]:
    """``body`` with the grounding instruction for ``corpus``, and what was added (for the summary)."""
    instruction = grounding_instruction(corpus)
    grounded, placed = with_instruction(body, instruction, placement)
    return grounded, GroundingPrompt(corpus=corpus, instruction=instruction, placement=placed)


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def _appended(content: Any, instruction: str) -> Any:
    if isinstance(content, list):
        return [*content, {"type": "text", "text": instruction}]
    if isinstance(content, str) and content:
        return content + ("" if content[-1].isspace() else " ") + instruction
    return instruction
