"""Revision: minimal, evidence-grounded edits of contradicted or unsupported sentences
(correct mode), with offline (slots), RARR (llm) and PURR-style (seq2seq) editors behind one
``Editor`` interface, the RARR guards, FAVA markup, and edit-quality metrics.

The names below are imported when first used (PEP 562), not with the package: importing one
of its modules (``revise.commands`` for the command line) does not load the editors, the
verifiers and spaCy with it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from middleware.revise.base import Editor, EditResult
    from middleware.revise.edits import EditBuffer, apply_edits, diff_edits
    from middleware.revise.factory import build_editor, build_eval_verifier
    from middleware.revise.fava import FavaSpan, FavaText, edited_text, original_text, parse, render
    from middleware.revise.guards import EditGuard, GuardedEditor, editable
    from middleware.revise.edit_metrics import attribution, edit_classes, f1_ap, preservation

_HOMES = {
    "EditBuffer": "edits",
    "EditGuard": "guards",
    "EditResult": "base",
    "Editor": "base",
    "FavaSpan": "fava",
    "FavaText": "fava",
    "GuardedEditor": "guards",
    "apply_edits": "edits",
    "attribution": "edit_metrics",
    "build_editor": "factory",
    "build_eval_verifier": "factory",
    "diff_edits": "edits",
    "edit_classes": "edit_metrics",
    "editable": "guards",
    "edited_text": "fava",
    "f1_ap": "edit_metrics",
    "original_text": "fava",
    "parse": "fava",
    "preservation": "edit_metrics",
    "render": "fava",
}

__all__ = [
    "EditBuffer",
    "EditGuard",
    "EditResult",
    "Editor",
    "FavaSpan",
    "FavaText",
    "GuardedEditor",
    "apply_edits",
    "attribution",
    "build_editor",
    "build_eval_verifier",
    "diff_edits",
    "edit_classes",
    "editable",
    "edited_text",
    "f1_ap",
    "original_text",
    "parse",
    "preservation",
    "render",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
