"""FAVA markup (Mishra et al., 2024): render a sentence's tags and edits, and parse markup back.

    <entity><delete>wrong</delete><mark>right</mark></entity>     (relation likewise)
    <contradictory>...</contradictory>, <invented>...</invented>,
    <subjective>...</subjective>, <unverifiable>...</unverifiable>  (span or whole-sentence tags)

The edited text is the markup with the type tags and mark wrappers dropped and the contents
of delete spans removed; the original text keeps delete contents and drops mark contents.
FAVA has no escaping: text that itself contains one of these eight tags does not round-trip.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from middleware.types import Edit, Tag, TagType

log = logging.getLogger(__name__)

FAVA_TYPES: tuple[TagType, ...] = ("entity", "relation", "contradictory", "invented", "subjective", "unverifiable")
_TAG = re.compile(r"<(/?)(" + "|".join(FAVA_TYPES) + r"|delete|mark)>", re.IGNORECASE)


@dataclass(frozen=True)
class FavaSpan:
    """A type tag's extent in the original text, and its suggested replacement, if any."""

    type: TagType
    start: int
    end: int
    text: str
    replacement: str | None = None


@dataclass
class FavaText:
    """Parsed markup. ``edits`` are the delete/mark groups (original offsets), typed by the
    innermost type tag around them."""

    original: str
    edited: str
    spans: list[FavaSpan] = field(default_factory=list)
    edits: list[Edit] = field(default_factory=list)


@dataclass
class _Node:
    type: TagType
    start: int
    end: int
    replacement: str | None
    children: list[_Node] = field(default_factory=list)


def render(
    text: str, edits: Sequence[Edit] = (), tags: Sequence[Tag | FavaSpan] = (), *, offset: int = 0
) -> str:
    """FAVA markup of ``text``. ``edits`` and ``tags`` have offsets into ``text`` plus
    ``offset`` (pass a sentence's message offset to render it from message-level tags).
    An edit is rendered with its tag type (``entity`` when it has none); a tag with the
    same span as an edit is folded into it; partially overlapping spans are dropped."""
    nodes = [
        _Node(e.tag or "entity", e.start - offset, e.end - offset, e.replacement) for e in edits
    ]
    spans = {(n.start, n.end) for n in nodes}
    for tag in tags:
        start, end = tag.start - offset, tag.end - offset
        if (start, end) in spans:
            continue
        suggestion = tag.replacement if tag.type in ("entity", "relation") else None
        nodes.append(_Node(tag.type, start, end, suggestion))
    roots = _nest(len(text), nodes)
    return _emit(text, roots, 0, len(text))


def _nest(length: int, nodes: list[_Node]) -> list[_Node]:
    """Order nodes into a tree by containment (wider first on ties)."""
    roots: list[_Node] = []
    stack: list[_Node] = []
    for node in sorted(nodes, key=lambda n: (n.start, -(n.end - n.start), n.replacement is not None)):
        if not 0 <= node.start <= node.end <= length:
            log.debug("FAVA span %s:%s outside the text; dropped", node.start, node.end)
            continue
        while stack and not _contains(stack[-1], node):
            stack.pop()
        siblings = stack[-1].children if stack else roots
        if siblings and siblings[-1].end > node.start:
            log.debug("FAVA span %s:%s overlaps another; dropped", node.start, node.end)
            continue
        siblings.append(node)
        stack.append(node)
    return roots


def _contains(outer: _Node, inner: _Node) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end and inner.start < outer.end


def _emit(text: str, nodes: list[_Node], start: int, end: int) -> str:
    out, at = [], start
    for node in nodes:
        out.append(text[at : node.start])
        if node.replacement is not None:
            body = text[node.start : node.end]
            inner = (f"<delete>{body}</delete>" if body else "") + (
                f"<mark>{node.replacement}</mark>" if node.replacement else ""
            )
        else:
            inner = _emit(text, node.children, node.start, node.end)
        out.append(f"<{node.type}>{inner}</{node.type}>")
        at = node.end
    out.append(text[at:end])
    return "".join(out)


def parse(markup: str) -> FavaText:
    """Original text, edited text, type spans and edits of FAVA markup. Tolerant: unknown
    tags are text, an unmatched closing tag is ignored, unclosed tags close at the end."""
    parser = _Parser()
    at = 0
    for match in _TAG.finditer(markup):
        parser.text(markup[at : match.start()])
        parser.tag(match.group(2).lower(), closing=match.group(1) == "/")
        at = match.end()
    parser.text(markup[at:])
    return parser.finish()


@dataclass
class _Frame:
    name: str
    start: int
    marks: list[str] = field(default_factory=list)
    has_edit: bool = False


class _Parser:
    def __init__(self) -> None:
        self.original: list[str] = []
        self.edited: list[str] = []
        self.pos = 0  # offset in the original text
        self.stack: list[_Frame] = []
        self.spans: list[FavaSpan] = []
        self.edits: list[Edit] = []
        self.group: Edit | None = None  # the delete/mark group being read

    def text(self, chunk: str) -> None:
        if not chunk:
            return
        names = {f.name for f in self.stack}
        in_delete, in_mark = "delete" in names, "mark" in names
        if not in_mark:
            self.original.append(chunk)
            self.pos += len(chunk)
        if not in_delete:
            self.edited.append(chunk)
        if self.group is None or not (in_delete or in_mark):
            self._flush()
            return
        if in_delete:
            self.group = self.group.model_copy(update={"end": self.pos, "original": self.group.original + chunk})
        if in_mark:
            self.group = self.group.model_copy(update={"replacement": self.group.replacement + chunk})
            if (frame := self._type_frame()) is not None:
                frame.marks.append(chunk)

    def tag(self, name: str, closing: bool) -> None:
        if not closing:
            if name in ("delete", "mark"):
                frame = self._type_frame()
                if frame is not None:
                    frame.has_edit = True
                if self.group is None:
                    tag = frame.name if frame else None
                    self.group = Edit(start=self.pos, end=self.pos, original="", replacement="", tag=tag)
            else:
                self._flush()
            self.stack.append(_Frame(name, self.pos))
            return
        depth = next((i for i in range(len(self.stack) - 1, -1, -1) if self.stack[i].name == name), None)
        if depth is None:
            return
        while len(self.stack) > depth:
            self._close(self.stack.pop())
        if name in FAVA_TYPES:
            self._flush()

    def finish(self) -> FavaText:
        self._flush()
        while self.stack:
            self._close(self.stack.pop())
        self.spans.sort(key=lambda s: (s.start, -(s.end - s.start)))
        return FavaText("".join(self.original), "".join(self.edited), self.spans, self.edits)

    def _type_frame(self) -> _Frame | None:
        return next((f for f in reversed(self.stack) if f.name in FAVA_TYPES), None)

    def _close(self, frame: _Frame) -> None:
        if frame.name in FAVA_TYPES:
            text = "".join(self.original)[frame.start : self.pos]
            replacement = "".join(frame.marks) if frame.has_edit else None
            self.spans.append(FavaSpan(frame.name, frame.start, self.pos, text, replacement))  # type: ignore[arg-type]

    def _flush(self) -> None:
        if self.group is not None and self.group.original != self.group.replacement:
            self.edits.append(self.group)
        self.group = None


def edited_text(markup: str) -> str:
    """The text FAVA markup describes after its edits."""
    return parse(markup).edited


def original_text(markup: str) -> str:
    """The text FAVA markup annotates, before its edits."""
    return parse(markup).original
