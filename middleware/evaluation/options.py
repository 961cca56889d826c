"""Command-line options the ``eval-*`` commands share with the commands whose output they
evaluate: the editor's (``edit`` and ``eval-edit``) and a verifier training run's, which
rebuild its held-out dev split (``eval-verifier``, ``calibrate-verifier``, ``fit-combiner``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Backend = Annotated[str, typer.Option(help="editor: slots (offline), llm (RARR prompts) or seq2seq (PURR FiD)")]
Model = Annotated[str | None, typer.Option(help="seq2seq editor: hub id, checkpoint dir or ONNX export dir")]
VerifierName = Annotated[
    str, typer.Option(help="verifier that gates edits and scores Attr_auto: auto (hybrid if an NLI model is "
                      "available offline, else slots), slots, nli or hybrid")
]  # fmt: skip
Embed = Annotated[bool, typer.Option(help="align with the embedding model too (exports MiniLM on first use)")]

# the options that rebuild a training run's held-out dev split (eval-verifier, calibrate-verifier)
ModelDir = Annotated[Path, typer.Option(help="exported NLI model directory")]
RunData = Annotated[list[Path], typer.Option("--data", help="pairs.jsonl sources of the run (dev split)")]
RunSynthetic = Annotated[Path | None, typer.Option(help="the run's synthetic.jsonl (same dev split)")]
DevSeed = Annotated[int | None, typer.Option(help="dev split seed (default: from train_meta.json)")]
DevSize = Annotated[int | None, typer.Option(help="dev split size (default: from train_meta.json)")]
