"""``factcheck check``: a text file through the same checked stream as a proxied answer,
printed coloured by verdict or as JSON."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from middleware.chat.checked_stream import CheckedAnswer, check_answer
from middleware.render import print_checked
from middleware.settings import load_settings
from middleware.types import CheckContext, Mode



def check(
    file: Annotated[str, typer.Argument(help="text file to check, or - for stdin")] = "-",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON reports instead of coloured text")] = False,
    mode: Annotated[Mode, typer.Option(help="annotate (suggest edits), correct (apply them) or block (stop at the first contradicted sentence)")] = Mode.ANNOTATE,
    question: Annotated[str | None, typer.Option(help="the user's question the text answers")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML settings file")] = None,
) -> None:
    """Run the whole pipeline on a text: every sentence checked against the evidence."""
    from middleware.composition import command_line_runner  # the app's modules, only when checking

    text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    settings = load_settings(config)
    logging.basicConfig(level="WARNING")
    answer = asyncio.run(check_answer(command_line_runner(settings), text, CheckContext(user_message=question, mode=mode)))
    if as_json:
        print(json.dumps(answer_json(answer), ensure_ascii=False, indent=2))
    else:
        print_checked(text, answer.reports, answer.summary)


def answer_json(answer: CheckedAnswer) -> dict[str, object]:
    """``--json``: the text as the client would get it, the reports and the summary (block
    mode, when it stopped the text: ``blocked``, the sentence's index and the reason)."""
    data: dict[str, object] = {
        "text": answer.text, "reports": [r.model_dump(mode="json") for r in answer.reports],
        "summary": answer.summary.model_dump(mode="json") if answer.summary is not None else None}
    if answer.blocked is not None:
        data["blocked"] = {"index": answer.blocked.report.index, "reason": answer.blocked.reason}
    return data


def register(app: typer.Typer) -> None:
    app.command("check")(check)
