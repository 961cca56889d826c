"""The factories from settings to served models (``runtime.loading``): one shared instance per
model and settings."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from middleware.runtime import clear_models, load_pair_scorer  # noqa: E402
from middleware.settings import RuntimeSettings  # noqa: E402


def test_load_pair_scorer_shares_one_instance(exports: dict[str, Path]) -> None:
    clear_models()
    settings = RuntimeSettings(provider="cpu")
    a = load_pair_scorer(str(exports["nli-fp32"]), "nli", settings)
    assert load_pair_scorer(str(exports["nli-fp32"]), "nli", settings) is a
    clear_models()
