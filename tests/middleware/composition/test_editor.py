"""The editors and their verifier as the composition root builds them (``middleware.composition.editor``)."""

from __future__ import annotations

import pytest

from middleware.settings import load_settings


def test_eval_verifier_is_hybrid_only_when_an_nli_model_is_available(tmp_path) -> None:
    from middleware.composition.editor import build_eval_verifier, nli_available

    settings = load_settings(**{"runtime.nli_model": str(tmp_path / "missing")})
    assert not nli_available(settings)
    assert build_eval_verifier(settings, "auto").name == "slots"
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "manifest.json").write_text("{}")
    assert nli_available(load_settings(**{"runtime.nli_model": str(tmp_path / "export")}))
    with pytest.raises(ValueError):
        build_eval_verifier(settings, "magic")
