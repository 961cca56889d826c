"""The ``factcheck`` command line. One composition root: subsystems register their own
commands through a ``register(app)`` function in the modules listed below."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer

from middleware.settings import SettingsError


class _Cli(typer.Typer):
    """The command line: settings that cannot be used end the command with one line naming
    each bad setting (exit status 2, as for a bad option), not a traceback."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except SettingsError as exc:
            print(f"factcheck: {exc}", file=sys.stderr)
            raise SystemExit(2) from None


app = _Cli(help="Streaming fact-checking middleware for OpenAI-compatible chat APIs.", no_args_is_help=True)

# Each module defines ``register(app: typer.Typer) -> None``.
_COMMAND_MODULES = (
    "middleware.commands.serve",  # serve, demo
    "middleware.commands.export",  # export
    "middleware.commands.index",  # index, search
    "middleware.commands.verify",  # verify
    "middleware.commands.check",  # check
    "middleware.commands.edit",  # edit, make-edit-data, train-editor
    "middleware.commands.train",  # train-verifier, calibrate-verifier, fit-combiner
    "middleware.evaluation.commands",  # eval-check, eval-grounding, eval-edit, eval-verifier, eval-battery
)

for _name in _COMMAND_MODULES:
    try:
        _module = importlib.import_module(_name)
    except ModuleNotFoundError as exc:  # a subsystem not built yet
        if exc.name is None or not _name.startswith(exc.name):
            raise
        continue
    _module.register(app)

if __name__ == "__main__":
    app()
