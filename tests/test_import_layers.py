"""The engine's layers contract (``pyproject.toml``, run by ``lint-imports`` in ``.ci/run``)
names every top-level module of ``middleware/``: a new module must be given its layer, or
nothing would stop it from importing upwards."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def top_level_modules() -> set[str]:
    """``middleware.<name>`` for every module and package directly under ``middleware/``."""
    names = {p.stem for p in (ROOT / "middleware").glob("*.py") if p.stem != "__init__"}
    names |= {p.parent.name for p in (ROOT / "middleware").glob("*/__init__.py")}
    return {f"middleware.{name}" for name in names}


def layered_modules() -> set[str]:
    """The top-level modules the layers contract names (a layer naming ``middleware.chat.x``
    counts for ``middleware.chat``)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    named = {part.strip() for layer in layers["layers"] for part in re.split(r"[|:]", layer)}
    return {".".join(name.split(".")[:2]) for name in named}


def test_every_top_level_middleware_module_is_in_a_layer() -> None:
    modules = top_level_modules()
    assert len(modules) > 20  # the glob found the package
    assert modules - layered_modules() == set()


def test_the_layers_name_no_module_that_does_not_exist() -> None:
    assert layered_modules() - top_level_modules() == set()
