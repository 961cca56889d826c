"""Documents: what the index reads from disk. Plain text and markdown as they are, HTML
reduced to its main text by trafilatura (as markdown, so headings still cut passages), and
JSON lines with configurable field names (one document per record).

Offsets of an HTML document's passages are offsets in the extracted text, not in the HTML.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


log = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown"})
HTML_SUFFIXES = frozenset({".html", ".htm"})
JSONL_SUFFIXES = frozenset({".jsonl"})
SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | JSONL_SUFFIXES


class UnreadableFile(Exception):
    """A file that cannot be indexed: not UTF-8, binary, or without any text."""


@dataclass(frozen=True)
class JsonlFields:
    """Field names of a JSON-lines record."""

    text: str = "text"
    title: str = "title"
    url: str = "url"


@dataclass(frozen=True)
class Document:
    text: str
    source: str = ""
    """File path, URL, or ``path#L<line>`` for a JSON-lines record without a URL."""
    title: str | None = None
    """Given title (HTML metadata, JSON field); None: the first heading, then the file name."""
    url: str | None = None


def find_files(paths: Iterable[Path]) -> list[Path]:
    """Supported files among ``paths`` and, recursively, under the directories among them
    (hidden files and folders skipped), resolved and sorted."""
    found: set[Path] = set()
    for path in paths:
        path = Path(path).resolve()
        if path.is_dir():
            found.update(p for p in _walk(path) if p.suffix.lower() in SUFFIXES)
        elif path.is_file():
            found.add(path)
    return sorted(found)


def _walk(root: Path) -> Iterator[Path]:
    for path in root.rglob("*"):
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(root).parts):
            yield path


def parse_documents(path: Path, data: bytes, fields: JsonlFields = JsonlFields()) -> list[Document]:
    """The documents held by the file ``path`` whose bytes are ``data``. Raises
    ``UnreadableFile`` for a file that holds no usable text."""
    suffix = path.suffix.lower()
    if suffix in HTML_SUFFIXES:
        return [_html_document(path, data)]
    if suffix in JSONL_SUFFIXES:
        return _jsonl_documents(path, _decode(data), fields)
    if suffix in TEXT_SUFFIXES:
        return [Document(text=_decode(data), source=str(path))]
    raise UnreadableFile(f"unsupported file type {suffix or '(none)'}")


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if "\x00" in text:
        raise UnreadableFile("binary content (NUL bytes)")
    return text


def _html_document(path: Path, data: bytes) -> Document:
    """Main text as markdown (all visible text when trafilatura finds no main part), title
    from the page's metadata. trafilatura detects the charset. (Imported here: a process that
    only opens an index, the relay checking the demo index at start-up, does not load it.)"""
    import trafilatura

    text = trafilatura.extract(data, output_format="markdown", include_comments=False, include_tables=True)
    if not text or not text.strip():
        text = trafilatura.html2txt(data)
    if not text or not text.strip():
        raise UnreadableFile("no text found in the HTML")
    meta = trafilatura.extract_metadata(data)
    title = meta.title if meta is not None else None
    url = meta.url if meta is not None else None
    return Document(text=text, source=str(path), title=title or None, url=url or None)


def _jsonl_documents(path: Path, text: str, fields: JsonlFields) -> list[Document]:
    """One document per record; a bad line is logged (file and line) and skipped."""
    docs = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            log.warning("skipping %s line %d: not JSON (%s)", path, lineno, exc.msg)
            continue
        body = record.get(fields.text) if isinstance(record, dict) else None
        if not isinstance(body, str) or not body.strip():
            log.warning("skipping %s line %d: no string field %r", path, lineno, fields.text)
            continue
        title, url = record.get(fields.title), record.get(fields.url)
        url = url if isinstance(url, str) and url else None
        docs.append(
            Document(
                text=body,
                source=url or f"{path}#L{lineno}",
                title=title if isinstance(title, str) and title else None,
                url=url,
            )
        )
    return docs
