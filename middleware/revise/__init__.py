"""Revision: minimal, evidence-grounded edits of contradicted or unsupported sentences
(correct mode), with offline (slots), RARR (llm) and PURR-style (seq2seq) editors behind one
``Editor`` interface, the RARR guards, FAVA markup, and edit-quality metrics."""

from middleware.revise.base import Editor, EditResult
from middleware.revise.edits import EditBuffer, apply_edits, diff_edits
from middleware.revise.factory import build_editor, build_eval_verifier
from middleware.revise.fava import FavaSpan, FavaText, edited_text, original_text, parse, render
from middleware.revise.guards import EditGuard, GuardedEditor, editable
from middleware.revise.edit_metrics import attribution, edit_classes, f1_ap, preservation

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
