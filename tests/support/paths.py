"""Paths the tests read, independent of where a test module sits in the tree."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
TEST_DATA = REPO_ROOT / "tests" / "data"
DEMO_CORPUS = REPO_ROOT / "middleware" / "evidence" / "demo_corpus"
ARTIFACTS = REPO_ROOT / "test-artifacts"
