"""``factcheck check``: a text file through the same checked stream as a proxied answer,
printed coloured by verdict or as JSON; ``factcheck eval-check``: the whole pipeline's
detection quality on a labelled dev set."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from middleware.chat.checked_stream import CheckedAnswer, check_answer
from middleware.checking import CheckRunner
from middleware.render import print_checked
from middleware.settings import load_settings
from middleware.types import CheckContext, Mode

CLI_SENTENCE_BUDGET_S = 30.0


def check(
    file: Annotated[str, typer.Argument(help="text file to check, or - for stdin")] = "-",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON reports instead of coloured text")] = False,
    mode: Annotated[Mode, typer.Option(help="annotate (suggest edits) or correct (apply them)")] = Mode.ANNOTATE,
    question: Annotated[str | None, typer.Option(help="the user's question the text answers")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML settings file")] = None,
) -> None:
    """Run the whole pipeline on a text: every sentence checked against the evidence."""
    text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    from middleware.composition import pipeline_checker

    settings = load_settings(config)
    logging.basicConfig(level="WARNING")
    # A check run from the command line is not racing a stream: it gets room.
    runner = CheckRunner(pipeline_checker(settings),
                         settings.check.model_copy(update={"sentence_budget_s": CLI_SENTENCE_BUDGET_S}))
    answer = asyncio.run(check_answer(runner, text, CheckContext(user_message=question, mode=mode)))
    if as_json:
        print(json.dumps(answer_json(answer), ensure_ascii=False, indent=2))
    else:
        print_checked(text, answer.reports, answer.summary)


def answer_json(answer: CheckedAnswer) -> dict[str, object]:
    """``--json``: the text as the client would get it, the reports and the summary."""
    return {"text": answer.text, "reports": [r.model_dump(mode="json") for r in answer.reports],
            "summary": answer.summary.model_dump(mode="json") if answer.summary is not None else None}


def eval_check(
    file: Annotated[Path, typer.Argument(help="dev set JSON lines (tests/data/verify_dev.jsonl)")],
    as_json: Annotated[bool, typer.Option("--json", help="print the metrics as JSON")] = False,
    config: Annotated[Path | None, typer.Option(help="YAML settings file")] = None,
) -> None:
    """Per-type precision, recall and F1 of the whole pipeline on a labelled dev set."""
    from middleware.pipeline.quality import check_rows, score

    settings = load_settings(config)
    logging.basicConfig(level="WARNING")
    rows = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    from middleware.composition import pipeline_checker

    reports = asyncio.run(check_rows(pipeline_checker(settings), rows))
    metrics = score(rows, reports).as_dict()
    if as_json:
        print(json.dumps(metrics, indent=2))
        return
    table = Table(title=f"{file.name}: {metrics['rows']} sentences")
    for column in ("type", "precision", "recall", "F1", "support"):
        table.add_column(column)
    for name, m in metrics["per_type"].items():
        table.add_row(name, f"{m['precision']:.2f}", f"{m['recall']:.2f}", f"{m['f1']:.2f}", str(m["support"]))
    console = Console()
    console.print(table)
    console.print(f"macro F1 {metrics['macro_f1']:.3f}  binary F1 {metrics['binary_f1']:.3f}  "
                  f"label accuracy {metrics['label_accuracy']:.3f}  fix accuracy {metrics['fix_accuracy']:.3f}")
    console.print("detected by dev type: " + ", ".join(f"{k} {v:.2f}" for k, v in metrics["detected_by_dev_type"].items()))


def register(app: typer.Typer) -> None:
    app.command("check")(check)
    app.command("eval-check")(eval_check)
