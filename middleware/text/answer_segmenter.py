"""Incremental sentence segmentation of a streamed assistant message.

``StreamSegmenter`` takes the content deltas of one message and cuts the message into
``Segment`` objects that tile it exactly (contiguous, in order, message char offsets).

Block structure (judged per line, markdown-style):

* ``SPACE``    whitespace and newlines between things, plus pure markup that carries no claim:
               list bullets (``- ``, ``* ``, ``+ ``, ``• ``, ``1. ``, ``1) ``, task boxes ``[ ]``/``[x]``),
               blockquote markers (``> ``) and thematic breaks (``---``, ``***``, ``___``).
* ``HEADING``  an ATX heading line (``#`` .. ``######``), markers included, without its newline.
* ``TABLE``    one table row (a line starting with ``|``, separator rows included), without its newline.
* ``CODE``     a fenced block (``` or ~~~), emitted one line at a time so that held-back output
               (correct mode) is not delayed by a long block: each line keeps its newline except
               the closing fence. An unclosed fence runs to the end of the message.
* ``SENTENCE`` everything else, cut into sentences that start at their first non-space char and
               end after their final punctuation plus closing quotes/brackets/emphasis/citation
               marks (``[1]``). Inline code stays inside; its spans go to ``code_spans``.

Sentence boundaries:

* ``. ! ? … ...`` (and CJK ``。！？``, which need no following space) followed by whitespace end a
  sentence unless the next word starts lowercase, or the word before the period is an abbreviation:
  titles and Latin forms never end a sentence (Dr., Mr., e.g., i.e., vs.); numeric prefixes do not
  before a digit (No. 5, Fig. 3, pp. 12, Jan. 5); ambiguous ones (U.S., Inc., Jr., St., a.m., initials
  like "J.") end a sentence only before a common sentence-starting word (The, It, He, ...).
* a blank line always ends a sentence; a single newline ends it when the next line is markup
  (list item, heading, table, fence, quote, rule) or, through the rule above, when the line ended
  with sentence punctuation; a line ending with ``:`` and a line that is one bold phrase
  (``**Summary**``, a pseudo-heading) end their sentence. Otherwise the newline is a soft wrap
  inside the sentence.
* URLs, e-mail addresses, decimals and versions never split: a period followed by a non-space
  character is not a boundary.

Not handled on purpose: setext headings (``Title`` over ``===``), indented code blocks (LLM output
indents nested list items far more often than code), inline code spanning a line break, HTML.

Determinism: ``feed`` emits a segment only when no later text can change it (it keeps a small
lookahead, e.g. the word after ``U.S.``); ``flush`` ends everything. Any split of the same text
into deltas therefore gives identical segments. Each character is scanned a bounded number of
times; only the unemitted tail of the message is kept in the working buffer.
"""

from __future__ import annotations

import re

from middleware.types import Segment, SegmentKind

__all__ = ["StreamSegmenter", "segment_text"]

# ---------------------------------------------------------------------------- rule tables
_TERMINAL = frozenset(".!?…。！？")
_CJK_TERMINAL = frozenset("。！？")
_CLOSERS = frozenset("\"'”’»›)]}*_」』）】")
_OPENERS = frozenset("\"'“‘«‹([{*_「『（【")
_CANDIDATE = re.compile(r"[.!?…。！？:`\n]")
_CITATION = re.compile(r"\[\^?\d{1,3}\]")
_CITATION_PREFIX = re.compile(r"\[\^?\d{0,3}\Z")
_MULTI_DOT = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
_MAX_TOKEN = 24  # longer words before a period are never abbreviations
# Lookahead caps. Each rule looks at a bounded stretch of text, so a pending decision is re-examined
# in bounded time on every delta (keeps the scan linear even on pathological input). A run that
# reaches its cap gets a fixed answer that depends only on the text, never on how it was split.
_RUN_CAP = 64  # runs of spaces, punctuation, closers, openers, backticks
_MAX_MARKUP_LINE = 256  # a thematic break or a code fence opening line is at most this long
_MAX_CODE_SPAN = 1024  # inline code must close within this many chars of opening
_SPACES = re.compile(r"[^\S\n]*")

_NEVER_END = frozenset(
    """mr mrs ms mx dr prof rev fr gen col capt cpt lt sgt maj cmdr adm gov sen rep hon pres supt
    messrs mme mlle e.g i.e vs v cf viz approx ca esp incl resp""".split()
)
"""Abbreviations that precede what they qualify: never the end of a sentence."""

_NUMERIC = frozenset(
    """no nos nr num fig figs pp p vol vols ch chap sec sect eq eqs art ref refs tab op para pt pts
    ex ed c n jan feb mar apr jun jul aug sep sept oct nov dec""".split()
)
"""Abbreviations that do not end a sentence before a number ("No. 5", "pp. 12-14", "Jan. 5")."""

_AMBIGUOUS = frozenset("inc ltd corp co llc plc jr sr st bros ave blvd rd mt ph.d al dept univ govt".split())
"""Abbreviations that often end a sentence too ("in the U.S. The ..."): a boundary only before a
word from ``_STARTERS``. Dotted initialisms (U.S., a.m.) and single capitals (initials) join them."""

_STARTERS = frozenset(
    """a an the this that these those it its he she they we i you his her their our my your there
    here in on at for from to by with without but and or so yet however also as after before when
    whenever while if although though since because during today then thus therefore hence some
    many most all any each every both either neither one other another such what which who whom
    whose how why where not no nor now later meanwhile moreover furthermore instead still finally
    first second third next last overall unlike despite according based note let please over under
    about around between among within until once indeed similarly additionally consequently
    nevertheless nonetheless otherwise yes is was are were has have had can could will would should
    do does did may might must""".split()
)
_MAX_STARTER = max(map(len, _STARTERS))

# abbreviation classes
_GENERAL, _NEVER, _NUM, _AMBIG, _ENUM = range(5)
# line kinds
_BLANK, _TEXT, _QUOTE, _LIST, _RULE, _HEADING, _TABLE, _FENCE = range(8)
# scanner modes
_M_GAP, _M_SENTENCE, _M_HEADING, _M_TABLE, _M_FENCE = range(5)
_MODE_OF_LINE = {_TEXT: _M_SENTENCE, _HEADING: _M_HEADING, _TABLE: _M_TABLE, _FENCE: _M_FENCE}
_KIND_OF_MODE = {_M_HEADING: SegmentKind.HEADING, _M_TABLE: SegmentKind.TABLE}

_Line = tuple[int, int, tuple[str, int] | None]
"""(line kind, position after its markup or of its first content char, fence (char, length))."""


def _is_space(ch: str) -> bool:
    """Whitespace that is not a line break (only ``\\n`` breaks lines)."""
    return ch != "\n" and ch.isspace()


def _spaces_end(buf: str, j: int) -> int:
    """End of the run of non-newline whitespace at ``j``, looking at most ``_RUN_CAP`` chars."""
    return _SPACES.match(buf, j, j + _RUN_CAP).end()


def _run_end(buf: str, j: int, chars: frozenset[str] | str, cap: int = _RUN_CAP) -> int:
    """End of the run of ``chars`` at ``j``, looking at most ``cap`` chars."""
    end = min(len(buf), j + cap)
    while j < end and buf[j] in chars:
        j += 1
    return j


class StreamSegmenter:
    """Cuts one streamed message into segments; see the module docstring for the rules."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._buf = ""  # unemitted tail of the message
        self._base = 0  # message offset of _buf[0]
        self._final = False
        self._index = 0
        self._mode = _M_GAP
        self._start = 0  # buffer offset where the open segment starts
        self._pos = 0  # buffer offset where scanning resumes
        self._line_start = True  # gap mode: only whitespace/markup since the line began
        self._after_marker = False  # gap mode: a list bullet was just consumed (task box may follow)
        self._spans: list[tuple[int, int]] = []  # inline code of the open sentence (message offsets)
        self._fence: tuple[str, int] = ("`", 3)
        self._fence_first = False  # fence mode: on the opening fence line

    # ------------------------------------------------------------------ public API
    def feed(self, delta: str) -> list[Segment]:
        """Add a delta; return the segments that no later text can change."""
        if not delta:
            return []
        self._parts.append(delta)
        self._final = False
        if self._mode == _M_SENTENCE and self._pos == len(self._buf) and not _CANDIDATE.search(delta):
            self._buf += delta  # fast path: mid-sentence, nothing in this delta can end it
            self._pos = len(self._buf)
            return []
        self._buf += delta
        return self._run()

    def flush(self) -> list[Segment]:
        """End of stream: return everything left. Safe to call twice; feeding afterwards resumes."""
        self._final = True
        return self._run()

    @property
    def text(self) -> str:
        """The full text received so far."""
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    # ------------------------------------------------------------------ driver
    def _run(self) -> list[Segment]:
        out: list[Segment] = []
        steps = _STEPS
        while steps[self._mode](self, out):
            pass
        cut = self._start
        if cut:
            self._buf = self._buf[cut:]
            self._base += cut
            self._start = 0
            self._pos -= cut
        return out

    def _emit(self, out: list[Segment], kind: SegmentKind, start: int, end: int) -> None:
        spans, self._spans = self._spans, []
        # model_construct: the fields are correct by construction and this runs on every token.
        out.append(
            Segment.model_construct(
                index=self._index,
                start=self._base + start,
                end=self._base + end,
                text=self._buf[start:end],
                kind=kind,
                code_spans=spans,
            )
        )
        self._index += 1

    def _to_gap(self, at: int) -> None:
        self._mode = _M_GAP
        self._start = self._pos = at
        self._line_start = False
        self._after_marker = False

    # ------------------------------------------------------------------ modes
    def _gap(self, out: list[Segment]) -> bool:
        """Consume whitespace and markup until the next content starts."""
        buf, n = self._buf, len(self._buf)
        p, line_start = self._pos, self._line_start
        while True:
            kind, fence = _TEXT, None
            if p >= n:
                if self._final and p > self._start:
                    self._emit(out, SegmentKind.SPACE, self._start, p)
                    self._start = p
                self._pos, self._line_start = p, line_start
                return False
            ch = buf[p]
            if ch == "\n":
                p, line_start, self._after_marker = p + 1, True, False
                continue
            if ch.isspace():
                p += 1
                continue
            if line_start:
                line = self._classify(p)
                if line is None:
                    self._pos, self._line_start = p, line_start
                    return False
                kind, end, fence = line
                if kind == _QUOTE:
                    p = end
                    continue
                if kind in (_RULE, _LIST):
                    p, line_start, self._after_marker = end, False, kind == _LIST
                    continue
            elif self._after_marker and ch == "[":
                box_end = self._task_box(p)
                if box_end is None:
                    self._pos, self._line_start = p, line_start
                    return False
                self._after_marker = False
                if box_end:
                    p = box_end
                    continue
            break
        if p > self._start:
            self._emit(out, SegmentKind.SPACE, self._start, p)
        self._mode = _MODE_OF_LINE[kind]
        self._start = self._pos = p
        self._after_marker = False
        if fence is not None:
            self._fence, self._fence_first = fence, True
        return True

    def _sentence(self, out: list[Segment]) -> bool:
        """Scan an open sentence for its end; resume where the last call had to stop."""
        buf, n = self._buf, len(self._buf)
        i = self._pos
        while True:
            m = _CANDIDATE.search(buf, i)
            if m is None:
                if not self._final:
                    self._pos = n
                    return False
                self._end_sentence(out, n)
                return True
            i = m.start()
            ch = buf[i]
            if ch == "`":
                after = self._code_span(i)
            elif ch == "\n":
                line = self._classify(i + 1)
                if line is not None and (line[0] != _TEXT or self._bold_line_before(i)):
                    self._end_sentence(out, i)
                    return True
                after = None if line is None else i + 1
            else:
                ends, after = self._colon(i) if ch == ":" else self._punct(i)
                if ends:
                    self._end_sentence(out, after)
                    return True
                if ends is None:
                    after = None
            if after is None:
                self._pos = i
                return False
            i = after

    def _bold_line_before(self, nl: int) -> bool:
        """Is the line ending at ``nl`` one bold phrase ("**Summary**"), i.e. a pseudo-heading?"""
        buf = self._buf
        line = buf[max(self._start, buf.rfind("\n", self._start, nl) + 1) : nl].strip()
        for mark in ("**", "__"):
            if len(line) > 4 and line.startswith(mark) and line.endswith(mark) and mark not in line[2:-2]:
                return True
        return False

    def _end_sentence(self, out: list[Segment], end: int) -> None:
        start = self._start
        end = start + len(self._buf[start:end].rstrip())
        self._emit(out, SegmentKind.SENTENCE, start, end)
        self._to_gap(end)

    def _line_block(self, out: list[Segment]) -> bool:
        """A heading or table row: one line, its trailing whitespace left to the gap."""
        nl = self._buf.find("\n", self._pos)
        if nl < 0:
            if not self._final:
                self._pos = len(self._buf)
                return False
            nl = len(self._buf)
        start = self._start
        end = start + len(self._buf[start:nl].rstrip())
        self._emit(out, _KIND_OF_MODE[self._mode], start, end)
        self._to_gap(end)
        return True

    def _fence_line(self, out: list[Segment]) -> bool:
        """One line of a fenced code block."""
        buf, start = self._buf, self._start
        nl = buf.find("\n", self._pos)
        if nl < 0:
            if not self._final:
                self._pos = len(buf)
                return False
            if len(buf) > start:
                self._emit(out, SegmentKind.CODE, start, len(buf))
            self._to_gap(len(buf))
            return True
        if not self._fence_first and self._is_closing_fence(buf[start:nl]):
            self._emit(out, SegmentKind.CODE, start, nl)
            self._to_gap(nl)
            return True
        self._emit(out, SegmentKind.CODE, start, nl + 1)
        self._start = self._pos = nl + 1
        self._fence_first = False
        return True

    def _is_closing_fence(self, line: str) -> bool:
        char, length = self._fence
        s = line.strip()
        return len(s) >= length and s == char * len(s)

    # ------------------------------------------------------------------ lookahead helpers
    # Each returns None when it would need text beyond the buffer and the stream is not final.

    def _classify(self, p: int) -> _Line | None:
        """What the line at ``p`` is (``p`` at its start or inside its indentation)."""
        buf, n, final = self._buf, len(self._buf), self._final
        q = _spaces_end(buf, p)
        if q - p >= _RUN_CAP:
            return _TEXT, q, None  # indented this deep: a continuation, whatever follows
        p = q
        if p >= n:
            return (_BLANK, p, None) if final else None
        ch = buf[p]
        if ch == "\n":
            return _BLANK, p, None
        if ch == ">":
            return _QUOTE, p + 1, None
        if ch == "|":
            return _TABLE, p, None
        if ch == "#":
            return self._classify_heading(p)
        if ch == "`" or ch == "~":
            return self._classify_fence(p)
        if ch in "-*_+•":
            return self._classify_bullet(p)
        if "0" <= ch <= "9":
            return self._classify_ordered(p)
        return _TEXT, p, None

    def _classify_heading(self, p: int) -> _Line | None:
        buf, n = self._buf, len(self._buf)
        j = _run_end(buf, p, "#", 7)
        if j - p == 7:
            return _TEXT, p, None
        if j >= n and not self._final:
            return None
        return (_HEADING if j >= n or buf[j].isspace() else _TEXT), p, None

    def _classify_fence(self, p: int) -> _Line | None:
        buf, n, char = self._buf, len(self._buf), self._buf[p]
        j = _run_end(buf, p, char)
        if j - p >= _RUN_CAP:
            return _TEXT, p, None
        if j >= n and not self._final:
            return None
        if j - p < 3:
            return _TEXT, p, None
        if char == "~":
            return _FENCE, p, (char, j - p)
        # A backtick fence's info string holds no backtick (else it is inline code: ```js```).
        end = min(n, j + _MAX_MARKUP_LINE)
        tick, nl = buf.find("`", j, end), buf.find("\n", j, end)
        if tick >= 0 and (nl < 0 or tick < nl):
            return _TEXT, p, None
        if nl >= 0 or self._final:
            return _FENCE, p, (char, j - p)
        return (_TEXT, p, None) if end - j >= _MAX_MARKUP_LINE else None

    def _classify_bullet(self, p: int) -> _Line | None:
        """A thematic break (``---``, ``* * *``) or a bullet list marker."""
        buf, n, char = self._buf, len(self._buf), self._buf[p]
        if char in "-*_":
            j, count, end = p, 0, min(n, p + _MAX_MARKUP_LINE)
            while j < end and (buf[j] == char or _is_space(buf[j])):
                count += buf[j] == char
                j += 1
            if j >= n and j - p < _MAX_MARKUP_LINE and not self._final:
                return None
            if count >= 3 and j - p < _MAX_MARKUP_LINE and (j >= n or buf[j] == "\n"):
                return _RULE, j, None
        return self._list_marker(p, p + 1) if char in "-*+•" else (_TEXT, p, None)

    def _classify_ordered(self, p: int) -> _Line | None:
        """An ordered list marker: up to 9 digits, ``.`` or ``)``, then whitespace."""
        buf, n = self._buf, len(self._buf)
        j = _run_end(buf, p, "0123456789", 10)
        if j - p == 10:
            return _TEXT, p, None
        if j >= n:
            return None if not self._final else (_TEXT, p, None)
        return self._list_marker(p, j + 1) if buf[j] in ".)" else (_TEXT, p, None)

    def _list_marker(self, p: int, end: int) -> _Line | None:
        """``buf[p:end]`` looks like a list marker: it is one if whitespace (or the end) follows."""
        if end >= len(self._buf):
            return (_LIST, end, None) if self._final else None
        return (_LIST, end, None) if self._buf[end].isspace() else (_TEXT, p, None)

    def _task_box(self, p: int) -> int | None:
        """End of a task-list box (``[ ]``, ``[x]``) at ``p``, 0 if there is none."""
        s = self._buf[p : p + 4]
        if len(s) < 4:
            if self._final:
                return p + 3 if s in ("[ ]", "[x]", "[X]") else 0
            could_be = s[1:2] in ("", " ", "x", "X") and s[2:3] in ("", "]")
            return None if could_be else 0
        return p + 3 if s[1] in " xX" and s[2] == "]" and s[3].isspace() else 0

    def _code_span(self, i: int) -> int | None:
        """Inline code opening at ``i``: position after it (recording its span), or after the
        backticks if they do not close on this line within ``_MAX_CODE_SPAN`` (then they are
        literal)."""
        buf, n, final = self._buf, len(self._buf), self._final
        j = _run_end(buf, i, "`")
        if j - i >= _RUN_CAP:
            return j
        if j >= n and not final:
            return None
        ticks = buf[i:j]
        window_end = j + _MAX_CODE_SPAN
        nl = buf.find("\n", j, window_end)
        if nl >= 0:
            limit, complete = nl, True
        elif n >= window_end:
            limit, complete = window_end, True
        else:
            limit, complete = n, final
        k = j
        while (f := buf.find(ticks, k, limit)) >= 0:
            e = r = f + len(ticks)
            while r < limit and buf[r] == "`":
                r += 1
            if r > e:  # a longer run does not close this span
                k = r
                continue
            if e >= n and not complete:
                return None  # the run might still grow
            self._spans.append((self._base + i, self._base + e))
            return e
        return j if complete else None

    def _colon(self, i: int) -> tuple[bool | None, int]:
        """A colon ends its sentence only at the end of a line ("Steps:\\n1. ...")."""
        buf, n = self._buf, len(self._buf)
        j = _run_end(buf, i + 1, _CLOSERS)
        k = _spaces_end(buf, j)
        if j - i > _RUN_CAP or k - j >= _RUN_CAP:
            return False, j
        if k >= n:
            return (True if self._final else None), j
        return buf[k] == "\n", j

    def _punct(self, i: int) -> tuple[bool | None, int]:
        """Is the punctuation run at ``i`` a sentence end? Also returns the end of the run
        plus its closers, where the sentence would end."""
        buf, n, final = self._buf, len(self._buf), self._final
        run_end = j = _run_end(buf, i, _TERMINAL)
        while j - run_end < _RUN_CAP:
            j = _run_end(buf, j, _CLOSERS)
            if j < n and buf[j] == "[":
                if m := _CITATION.match(buf, j):
                    j = m.end()
                    continue
                if not final and _CITATION_PREFIX.match(buf, j):
                    return None, j
            break
        if run_end - i >= _RUN_CAP or j - run_end >= _RUN_CAP:
            return False, j
        if j >= n:
            return (True if final else None), j
        if any(ch in _CJK_TERMINAL for ch in buf[i:run_end]):
            return True, j
        if not buf[j].isspace():
            return False, j  # 3.14, example.com, e.g.,
        k = _spaces_end(buf, j)
        if k - j >= _RUN_CAP:
            return True, j
        if k >= n:
            return (True if final else None), j
        if buf[k] == "\n":
            line = self._classify(k + 1)
            if line is None:
                return None, j
            if line[0] != _TEXT:
                return True, j
            k = line[1]
        return self._next_starts_sentence(i, run_end, k), j

    def _next_starts_sentence(self, i: int, run_end: int, k: int) -> bool | None:
        """Decide a boundary from the word before the period and the text starting at ``k``."""
        buf, n = self._buf, len(self._buf)
        k0, k = k, _run_end(buf, k, _OPENERS)
        if k - k0 >= _RUN_CAP:
            return True
        if k >= n:
            return True if self._final else None
        first = buf[k]
        if run_end - i != 1 or buf[i] != ".":
            return not first.islower()  # ! ? ... : lowercase continues ("Really?" she asked.)
        cls = self._abbreviation_class(i)
        if cls == _NEVER or cls == _ENUM or first.islower():
            return False
        if cls == _NUM:
            return not first.isdigit()
        if cls == _AMBIG:
            return self._starter_word_at(k)
        return True

    def _abbreviation_class(self, i: int) -> int:
        """Class of the word that ends at the period at ``i``."""
        buf, start = self._buf, self._start
        j = i
        limit = max(start, i - _MAX_TOKEN)
        while j > limit and not buf[j - 1].isspace():
            j -= 1
        if j > start and not buf[j - 1].isspace():
            return _GENERAL  # too long for an abbreviation
        word = buf[j:i].lstrip("".join(_OPENERS))
        if not word:
            return _GENERAL
        if len(word) == 1 and word.isupper():
            return _AMBIG  # an initial: J. R. R. Tolkien
        low = word.lower()
        if low in _NEVER_END:
            return _NEVER
        if low in _NUMERIC:
            return _NUM
        if low in _AMBIGUOUS or _MULTI_DOT.fullmatch(word):
            return _AMBIG
        if word.isdigit() and len(word) <= 3 and j == start:
            return _ENUM  # "**1. Introduction**": a sentence is never just a number
        return _GENERAL

    def _starter_word_at(self, k: int) -> bool | None:
        """Is the word at ``k`` a common sentence start (and not itself an initial like "A.")?"""
        buf, n = self._buf, len(self._buf)
        j = k
        while j < n and buf[j].isalpha() and j - k <= _MAX_STARTER:
            j += 1
        if j - k > _MAX_STARTER:
            return False
        if j >= n:
            if not self._final:
                return None
            return buf[k:j].lower() in _STARTERS
        return buf[j] != "." and buf[k:j].lower() in _STARTERS


# The scanner for each mode, indexed by mode. Plain functions at module level: bound methods
# stored on the instance would make every segmenter a reference cycle (garbage for the
# cyclic collector, one per stream).
_STEPS = (
    StreamSegmenter._gap,
    StreamSegmenter._sentence,
    StreamSegmenter._line_block,
    StreamSegmenter._line_block,
    StreamSegmenter._fence_line,
)


def segment_text(text: str) -> list[Segment]:
    """Segment a complete message at once (same result as any streamed split of it)."""
    seg = StreamSegmenter()
    return seg.feed(text) + seg.flush()
