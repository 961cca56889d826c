"""The benchmark's row format and its checks (used by the test and by ``validate``)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from middleware.evaluation.planted import EXPECTED_VERDICT, FIX_KINDS, KINDS

FIELDS = ("id", "kind", "sentence", "context", "expected_verdict", "expected_fix", "evidence", "source")
MIN_PER_KIND = {**{k: 25 for k in KINDS if k != "true"}, "true": 230}
MIN_PLANTED = 230
MIN_SOURCES = 40
CORPUS = Path(__file__).resolve().parents[2] / "middleware" / "evidence" / "demo_corpus"


def load_rows(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows[:limit] if limit else rows


def row_problems(row: dict[str, Any], corpus: Path = CORPUS) -> list[str]:
    """What is wrong with one row (empty when it is well formed)."""
    if tuple(sorted(row)) != tuple(sorted(FIELDS)):
        return [f"{row.get('id')}: fields {sorted(row)}"]
    problems = []
    kind, fix = row["kind"], row["expected_fix"]
    if kind not in KINDS:
        problems.append(f"{row['id']}: unknown kind {kind!r}")
    elif row["expected_verdict"] != EXPECTED_VERDICT[kind]:
        problems.append(f"{row['id']}: verdict {row['expected_verdict']!r} for kind {kind!r}")
    if (fix is not None) != (kind in FIX_KINDS) or fix == row["sentence"]:
        problems.append(f"{row['id']}: expected_fix {fix!r} for kind {kind!r}")
    source = corpus / row["source"]
    if not source.is_file() or row["evidence"] not in source.read_text(encoding="utf-8"):
        problems.append(f"{row['id']}: evidence not found verbatim in {row['source']}")
    return problems


def data_problems(rows: Sequence[dict[str, Any]], corpus: Path = CORPUS) -> list[str]:
    """Every row's problems, duplicate ids, and counts under the minimums."""
    problems = [p for row in rows for p in row_problems(row, corpus)]
    ids = Counter(row.get("id") for row in rows)
    problems += [f"duplicate id {i}" for i, n in ids.items() if n > 1]
    kinds = Counter(row.get("kind") for row in rows)
    problems += [f"{k}: {kinds[k]} rows < {n}" for k, n in MIN_PER_KIND.items() if kinds[k] < n]
    if sum(kinds[k] for k in KINDS if k != "true") < MIN_PLANTED:
        problems.append(f"fewer than {MIN_PLANTED} planted rows")
    if len({row.get("source") for row in rows}) < MIN_SOURCES:
        problems.append(f"fewer than {MIN_SOURCES} corpus files")
    return problems


def main() -> None:
    """``python -m load_tests.quality.data``: check planted.jsonl, print the counts."""
    rows = load_rows(Path(__file__).with_name("planted.jsonl"))
    for problem in data_problems(rows):
        print(problem)
    print(dict(Counter(r["kind"] for r in rows)), len({r["source"] for r in rows}), "files")


if __name__ == "__main__":
    main()
