"""The ``factcheck`` command line. One composition root: subsystems register their own
commands through a ``register(app)`` function in the modules listed below."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(help="Streaming fact-checking middleware for OpenAI-compatible chat APIs.", no_args_is_help=True)

# Each module defines ``register(app: typer.Typer) -> None``.
_COMMAND_MODULES = (
    "middleware.server.commands",  # serve, demo
    "middleware.runtime.commands",  # export
    "middleware.evidence.commands",  # index, search
    "middleware.pipeline.commands",  # verify
    "middleware.chat.check_command",  # check, eval-check, eval-grounding
    "middleware.revise.commands",  # edit, eval-edit, make-edit-data, train-editor
    "middleware.training.commands",  # train-verifier, eval-verifier, calibrate-verifier
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
