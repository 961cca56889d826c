"""``factcheck check``: a text file through the same checked stream as a proxied answer,
printed coloured by verdict or as JSON; ``factcheck eval-check``: the whole pipeline's
detection quality on a labelled dev set; ``factcheck eval-grounding``: QUIP-Score, verdicts and
length of an upstream's answers with and without according-to prompting."""

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
from middleware.chat.grounding_eval import VARIANTS, GroundingEval, eval_grounding, parse_questions
from middleware.chat.grounding_prompt import is_off
from middleware.checking import CheckRunner
from middleware.render import print_checked
from middleware.settings import Settings, load_settings
from middleware.types import CheckContext, GroundingPlacement, Mode

CLI_SENTENCE_BUDGET_S = 30.0
DEFAULT_EVAL_CORPUS = "Wikipedia"
"""The corpus ``eval-grounding`` names when neither ``--corpus`` nor ``check.grounding_prompt`` does (the paper's)."""


def check(
    file: Annotated[str, typer.Argument(help="text file to check, or - for stdin")] = "-",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON reports instead of coloured text")] = False,
    mode: Annotated[Mode, typer.Option(help="annotate (suggest edits) or correct (apply them)")] = Mode.ANNOTATE,
    question: Annotated[str | None, typer.Option(help="the user's question the text answers")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML settings file")] = None,
) -> None:
    """Run the whole pipeline on a text: every sentence checked against the evidence."""
    text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    settings = load_settings(config)
    logging.basicConfig(level="WARNING")
    answer = asyncio.run(check_answer(cli_runner(settings), text, CheckContext(user_message=question, mode=mode)))
    if as_json:
        print(json.dumps(answer_json(answer), ensure_ascii=False, indent=2))
    else:
        print_checked(text, answer.reports, answer.summary)


def cli_runner(settings: Settings) -> CheckRunner:
    """The pipeline's runner for the command line: a check there is not racing a stream, it gets room."""
    from middleware.composition import pipeline_checker

    return CheckRunner(pipeline_checker(settings),
                       settings.check.model_copy(update={"sentence_budget_s": CLI_SENTENCE_BUDGET_S}))


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


def eval_grounding_command(
    questions: Annotated[Path, typer.Argument(help="questions: one per line, or JSON lines with 'question'")],
    upstream: Annotated[str, typer.Option(help="OpenAI-compatible base URL of the LLM to ask")],
    corpus: Annotated[str | None, typer.Option(
        help="the corpus the instructions name (default: check.grounding_prompt, else Wikipedia)",
    )] = None,
    placement: Annotated[GroundingPlacement | None, typer.Option(
        help="append to the question (the paper's form) or a system message (default: check.grounding_placement)",
    )] = None,
    model: Annotated[str | None, typer.Option(help="the request's model")] = None,
    temperature: Annotated[float | None, typer.Option(help="the request's temperature (default: the upstream's)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the figures and every answer as JSON")] = False,
    config: Annotated[Path | None, typer.Option(help="YAML settings file")] = None,
) -> None:
    """Each question with no instruction, the grounding instruction ("Respond to this question
    using only information that can be attributed to CORPUS.") and the anti-grounding control,
    every answer checked: mean QUIP-Score, verdict mix and mean length per variant."""
    from middleware.composition import build_upstream

    settings = load_settings(config, **{"upstream.url": upstream})
    logging.basicConfig(level="WARNING")
    try:
        asked = parse_questions(questions.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise typer.BadParameter(f"{questions}: {exc}", param_hint="QUESTIONS") from exc
    named = (corpus or settings.check.grounding_prompt or "").strip()
    if is_off(named) or not named:
        named = DEFAULT_EVAL_CORPUS
    runner = cli_runner(settings)

    async def run() -> GroundingEval:
        client = build_upstream(settings)
        try:
            return await eval_grounding(asked, client, runner, named, placement or settings.check.grounding_placement,
                                        model, temperature)
        finally:
            await client.close()

    result = asyncio.run(run())
    if as_json:
        print(json.dumps(result.as_dict(), ensure_ascii=False, indent=2))
        return
    print_grounding(result)


def print_grounding(result: GroundingEval) -> None:
    table = Table(title=f"according to {result.corpus} ({result.placement}): "
                        f"{result.questions} questions")
    for column in ("variant", "QUIP", "scored", "verdicts", "mean chars", "failed"):
        table.add_column(column)
    for variant in VARIANTS:
        v = result.variant(variant)
        table.add_row(variant, "-" if v["quip"] is None else f"{v['quip']:.3f}", f"{v['quip_answers']}/{v['answers']}",
                      ", ".join(f"{label} {n}" for label, n in v["verdicts"].items()) or "-",
                      "-" if v["mean_chars"] is None else f"{v['mean_chars']:.0f}", str(v["failed"]))
    console = Console()
    console.print(table)
    console.print("QUIP: share of the answer's 25-grams in the local corpus portrait, mean over scored answers.")


def register(app: typer.Typer) -> None:
    app.command("check")(check)
    app.command("eval-check")(eval_check)
    app.command("eval-grounding")(eval_grounding_command)
