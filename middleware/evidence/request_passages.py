"""The request's own context as evidence passages (RAG faithfulness).

Most chat apps that care about facts put the documents in the request: system and user
messages, tool/function results, or ``factcheck.context``. :func:`request_passages` cuts them
with the project's one passage splitter, each passage named by where it came from
(``source='messages[2] (tool)'``, ``'factcheck.context[0]'``, provider ``'context'``);
:mod:`middleware.evidence.context_source` searches them.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from middleware.evidence.passages import STRIDE, WINDOW, document_passages
from middleware.text.answer_segmenter import segment_text
from middleware.types import Passage, SegmentKind

PROVIDER = "context"
"""The ``provider`` of every passage taken from the request (``context_source.ContextSource``
searches them)."""
CONTEXT_ROLES = {"system": "system", "developer": "developer", "user": "user", "tool": "tool", "function": "function"}
"""Message roles whose text is context (the assistant's own earlier turns are not evidence)."""
INLINE_CONTEXT_CHARS = 4000
"""A request context up to this many characters is cut into passages (the relay's
``chat.context_cutter``) and indexed (the pipeline's request reading) on the event loop, well
under a millisecond each; a larger one off it, where the hop costs less than the work."""
QUESTION_MAX_CHARS = 500
"""A longer user message is taken to hold documents: it is context, and only its questions go
closed-book. A shorter one is the request itself."""


class RequestMessage(Protocol):
    """A chat message as read here (the chat request's ``Message``)."""

    @property
    def role(self) -> str: ...

    def text(self) -> str: ...


class RequestDocument(Protocol):
    """A ``factcheck.context`` document (the chat request's ``ContextDocument``)."""

    @property
    def text(self) -> str: ...

    @property
    def title(self) -> str | None: ...

    @property
    def source(self) -> str | None: ...


class RequestOptions(Protocol):
    """The request's ``factcheck`` options, as far as its context goes."""

    @property
    def context(self) -> Sequence[RequestDocument | str]: ...


class ContextRequest(Protocol):
    """What is read from a chat request to find its context: its messages and its factcheck
    options (``None`` when it has none)."""

    @property
    def messages(self) -> Sequence[RequestMessage]: ...

    @property
    def factcheck(self) -> RequestOptions | None: ...


@dataclass(frozen=True, slots=True)
class ContextText:
    """One piece of the request's context before splitting."""

    source: str
    text: str
    title: str | None = None
    url: str | None = None


def message_texts(messages: Sequence[RequestMessage] | Sequence[tuple[str, str]]) -> list[ContextText]:
    """The context-bearing messages, each named by its position: ``messages[2] (tool)``.
    System, developer, tool and function messages always; a user message only when it is
    long enough to hold a document (:data:`QUESTION_MAX_CHARS`): a short one is the request
    itself ("Tell me about Paris."), not evidence. Takes protocol ``Message`` objects or
    (role, text) pairs (the LangChain adapter's)."""
    out = []
    for i, message in enumerate(messages):
        role, text = message if isinstance(message, tuple) else (message.role, message.text())
        if role == "user" and len(text.strip()) <= QUESTION_MAX_CHARS:
            continue
        if role in CONTEXT_ROLES and text.strip():
            out.append(ContextText(f"messages[{i}] ({role})", readable(text) if role in ("tool", "function") else text))
    return out


def document_texts(documents: Sequence[RequestDocument | str]) -> list[ContextText]:
    """``factcheck.context`` documents (``ContextDocument`` or bare strings), named
    ``factcheck.context[i]``; a document's own ``source`` becomes its URL when it is one,
    else its title when it has none."""
    out = []
    for i, doc in enumerate(documents):
        text, title, origin = (doc, None, None) if isinstance(doc, str) else (doc.text, doc.title, doc.source)
        url = origin if origin and re.match(r"https?://", origin) else None
        if origin and url is None and title is None:
            title = origin
        if text.strip():
            out.append(ContextText(f"factcheck.context[{i}]", readable(text), title=title, url=url))
    return out


def context_passages(texts: Iterable[ContextText], window: int = WINDOW, stride: int = STRIDE) -> list[Passage]:
    """Split every context text like an indexed document. Passages made only of questions
    (the user asking, not telling) carry no facts and are left out."""
    passages = []
    for item in texts:
        for passage in document_passages(item.text, item.source, item.title, window, stride, provider=PROVIDER,
                                      url=item.url):
            if not _only_questions(passage.text):
                passages.append(passage)
    return passages


def request_texts(request: ContextRequest) -> list[ContextText]:
    """The context-bearing texts of a chat request."""
    texts = message_texts(request.messages)
    if request.factcheck is not None:
        texts += document_texts(request.factcheck.context)
    return texts


def request_passages(request: ContextRequest, window: int = WINDOW, stride: int = STRIDE) -> list[Passage]:
    """Every context passage of a chat request."""
    return context_passages(request_texts(request), window, stride)


STRUCTURED_MAX_CHARS = 200_000
"""Structured data longer than this is read as text (parsing a Python literal is recursive)."""


def readable(text: str) -> str:
    """Structured data (JSON, or a Python literal as a ``str(dict)`` prints it) as markdown
    list lines the segmenter cuts one per object: ``- title: Eiffel Tower; completed: 1889``
    (an object's fields stay together, so its name and its numbers are in one evidence
    sentence); keys in words (``OutdoorSeating`` -> ``Outdoor Seating``), true and false as
    yes and no, so that a verifier reads "Outdoor Seating: no" against "it has outdoor
    seating". Other text is returned unchanged."""
    data = _structured(text)
    if not isinstance(data, dict | list):
        return text
    lines: list[str] = []
    _render(data, "", lines)
    return "\n".join(f"- {line}" for line in lines) + "\n" if lines else text


def _structured(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[" or len(stripped) > STRUCTURED_MAX_CHARS:
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    try:
        return ast.literal_eval(stripped)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _render(value: Any, key: str, lines: list[str]) -> None:
    if isinstance(value, dict):
        fields = [f"{_label(k)}: {_field(k, v)}" for k, v in value.items() if _is_scalar(v)]
        if fields:
            lines.append(f"{_label(key) + ' — ' if key else ''}{'; '.join(fields)}")
        for k, v in value.items():
            if not _is_scalar(v):
                _render(v, k, lines)
    elif isinstance(value, list | tuple):
        if value and all(_is_scalar(v) for v in value):
            lines.append(f"{_label(key) + ': ' if key else ''}{', '.join(_scalar(v) for v in value)}")
        else:
            for item in value:
                _render(item, key, lines)
    elif value is not None:
        lines.append(f"{_label(key) + ': ' if key else ''}{_scalar(value)}")


def _field(key: Any, value: Any) -> str:
    """A field's value as a reader of the data would say it: a US state's code with its name
    ('CA (California)'), opening hours with the clock times people write ('17:0-21:0' ->
    '17:00-21:00 (5:00 PM to 9:00 PM)'). Answers written from such records say 'California'
    and '5 PM to 9 PM'; the verifier read neither from the code and the bare figures."""
    text = _scalar(value)
    if str(key).lower() == "state" and (name := US_STATES.get(text.upper())):
        return f"{text} ({name})"
    if hours := _HOURS.fullmatch(text):
        h1, m1, h2, m2 = (int(g) for g in hours.groups())
        return f"{h1}:{m1:02d}-{h2}:{m2:02d} ({_clock(h1, m1)} to {_clock(h2, m2)})"
    return text


def _clock(hour: int, minute: int) -> str:
    """24-hour time in 12-hour words: 17, 30 -> '5:30 PM'; 0, 0 -> '12:00 AM'."""
    return f"{(hour % 12) or 12}:{minute:02d} {'AM' if hour % 24 < 12 else 'PM'}"


_HOURS = re.compile(r"([01]?\d|2[0-4]):([0-5]?\d)-([01]?\d|2[0-4]):([0-5]?\d)")

US_STATES = {
    "AL": "Alabama", "AK": "Alaska", "AZ": "Arizona", "AR": "Arkansas", "CA": "California", "CO": "Colorado",
    "CT": "Connecticut", "DE": "Delaware", "DC": "District of Columbia", "FL": "Florida", "GA": "Georgia",
    "HI": "Hawaii", "ID": "Idaho", "IL": "Illinois", "IN": "Indiana", "IA": "Iowa", "KS": "Kansas", "KY": "Kentucky",
    "LA": "Louisiana", "ME": "Maine", "MD": "Maryland", "MA": "Massachusetts", "MI": "Michigan", "MN": "Minnesota",
    "MS": "Mississippi", "MO": "Missouri", "MT": "Montana", "NE": "Nebraska", "NV": "Nevada", "NH": "New Hampshire",
    "NJ": "New Jersey", "NM": "New Mexico", "NY": "New York", "NC": "North Carolina", "ND": "North Dakota",
    "OH": "Ohio", "OK": "Oklahoma", "OR": "Oregon", "PA": "Pennsylvania", "RI": "Rhode Island",
    "SC": "South Carolina", "SD": "South Dakota", "TN": "Tennessee", "TX": "Texas", "UT": "Utah", "VT": "Vermont",
    "VA": "Virginia", "WA": "Washington", "WV": "West Virginia", "WI": "Wisconsin", "WY": "Wyoming",
}  # fmt: skip
"""US state and district codes (USPS) and their names."""


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "null" if value is None else str(value).strip()


def _label(key: Any) -> str:
    """``review_stars`` -> ``review stars``, ``OutdoorSeating`` -> ``Outdoor Seating`` (``WiFi`` stays)."""
    return _CAMEL.sub(" ", str(key).replace("_", " ")).strip()


_CAMEL = re.compile(r"(?<=[a-z]{2})(?=[A-Z][a-z])")


def _only_questions(text: str) -> bool:
    units = [s.text.strip() for s in segment_text(text) if s.kind is SegmentKind.SENTENCE and s.text.strip()]
    return bool(units) and all(u.rstrip("\"')]*_").endswith("?") for u in units)
