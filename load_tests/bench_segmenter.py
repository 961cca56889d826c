"""Segmenter throughput: microseconds per streamed delta for a markdown answer at several
delta sizes, then for inputs that would be quadratic without the segmenter's lookahead caps.

    python -m load_tests.bench_segmenter
"""

from __future__ import annotations

import time

from middleware.text.answer_segmenter import StreamSegmenter

ANSWER = """## Overview

Dr. J. R. R. Tolkien was born on Jan. 3, 1892, in Bloemfontein. He moved to the U.K. as a child, \
e.g. to Birmingham. The population was approx. 3.14 million (see Fig. 2, pp. 12-14). Was it? Yes!

- Python 3.11 is faster than v2.0.1... Really.
- Visit https://example.com/a.b?x=1. Or mail john.doe@mail.example.org for details.
- Use `foo.bar()` to call it. "He left." She stayed.

| Name | Value |
|------|-------|
| pi   | 3.14  |

```python
def f(x):
    return x.y  # not checked. Never.
```

The U.S. Army was founded in 1775. In the U.S. The rules differ (See above.) Next sentence here.
"""


def time_feed(text: str, token_chars: int, repeats: int) -> tuple[float, int, int]:
    """Seconds per delta, deltas and segments per message, feeding ``text`` in fixed-size deltas."""
    deltas = [text[i : i + token_chars] for i in range(0, len(text), token_chars)]
    segments = 0
    t0 = time.perf_counter()
    for _ in range(repeats):
        s = StreamSegmenter()
        for d in deltas:
            segments += len(s.feed(d))
        segments += len(s.flush())
    return (time.perf_counter() - t0) / (repeats * len(deltas)), len(deltas), segments // repeats


def main() -> None:
    """Print microseconds per delta: a markdown answer at several delta sizes, then inputs that
    would be quadratic without the lookahead caps (one 100k-char line, 100k backticks)."""
    time_feed(ANSWER, 4, 5)  # warm up
    for size in (1, 4, 16):
        per, deltas, segments = time_feed(ANSWER, size, 200)
        print(
            f"answer, {size:2d}-char deltas: {per * 1e6:6.2f} us/delta  ({deltas} deltas, {segments} segments)"
        )
    for name, text in (("one 100k-char line", "word " * 20_000), ("100k backticks", "`" * 100_000)):
        per, deltas, _ = time_feed(text, 4, 1)
        print(f"{name}, 4-char deltas: {per * 1e6:6.2f} us/delta  ({deltas} deltas)")


if __name__ == "__main__":
    main()
