"""The ``eval-*`` commands: ``eval-check`` (the whole pipeline's detection on a labelled dev
set), ``eval-grounding`` (QUIP-Score, verdicts and length of an upstream's answers with and
without according-to prompting), ``eval-edit`` (the editor's corrections), ``eval-verifier``
(a verifier on WiCE / FEVER-Symmetric and a training run's dev split) and ``eval-battery``
(the third-party battery, per dataset)."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from middleware.chat.grounding_prompt import is_off
from middleware.evaluation.grounding import VARIANTS, GroundingEval, eval_grounding, parse_questions
from middleware.evaluation.options import Backend, DevSeed, DevSize, Embed, Model, RunData, RunSynthetic, VerifierName
from middleware.settings import load_settings
from middleware.types import GroundingPlacement

DEFAULT_EVAL_CORPUS = "Wikipedia"
"""The corpus ``eval-grounding`` names when neither ``--corpus`` nor ``check.grounding_prompt`` does (the paper's)."""
_BACKEND_HELP = (
    "verifier backend run on --wice/--fever-symmetric: slots, nli, hybrid or llm; repeatable "
    "(default: settings pipeline.verifier)"
)
_MODEL_HELP = (
    "exported NLI model directory: the nli and hybrid backends' model, and the one measured on the dev split "
    "(default: settings runtime.nli_model, the bundled onnx_models/verifier)"
)


def register(app: typer.Typer) -> None:
    app.command("eval-check")(eval_check)
    app.command("eval-grounding")(eval_grounding_command)
    app.command("eval-edit")(eval_edit)
    app.command("eval-verifier")(eval_verifier)
    app.command("eval-battery")(eval_battery)


def eval_check(
    file: Annotated[Path, typer.Argument(help="dev set JSON lines (tests/data/verify_dev.jsonl)")],
    as_json: Annotated[bool, typer.Option("--json", help="print the metrics as JSON")] = False,
    config: Annotated[Path | None, typer.Option(help="YAML settings file")] = None,
) -> None:
    """Per-type precision, recall and F1 of the whole pipeline on a labelled dev set."""
    from middleware.evaluation.checker import check_rows, score

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
    from middleware.composition import build_upstream, command_line_runner

    settings = load_settings(config, **{"upstream.url": upstream})
    logging.basicConfig(level="WARNING")
    try:
        asked = parse_questions(questions.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise typer.BadParameter(f"{questions}: {exc}", param_hint="QUESTIONS") from exc
    named = (corpus or settings.check.grounding_prompt or "").strip()
    if is_off(named) or not named:
        named = DEFAULT_EVAL_CORPUS
    runner = command_line_runner(settings)

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

def eval_edit(
    file: Annotated[Path, typer.Argument(help="JSON lines {text, evidence?, context?, original?, type?}")],
    backend: Backend = "slots",
    model: Model = None,
    verifier: VerifierName = "auto",
    embed: Embed = False,
    limit: Annotated[int, typer.Option(help="evaluate only the first N lines (0: all)")] = 0,
    clean: Annotated[bool, typer.Option(help="edit the correct 'original' texts instead: spurious-edit check")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Attr_auto before/after, Pres_Lev, F1_AP, PURR edit classes and exact-fix rate."""
    from middleware.training.editor_data import read_lines
    from middleware.composition.editor import build_edit_pair
    from middleware.evaluation.editor import evaluate

    checker, editor = build_edit_pair(load_settings(), backend, model, verifier, embed)
    rows = list(read_lines(file))
    rows = rows[:limit] if limit else rows
    if clean:
        rows = [row | {"text": row["original"]} for row in rows if isinstance(row.get("original"), str)]
    started = time.perf_counter()
    report = asyncio.run(evaluate(rows, checker, editor))
    summary = {"file": str(file) + (" (clean originals)" if clean else ""), "editor": editor.name,
               "verifier": checker.name} | report.summary()
    summary["seconds_per_line"] = round((time.perf_counter() - started) / max(len(rows), 1), 3)
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    _print_summary(summary)

def _print_summary(summary: dict) -> None:
    console = Console(width=max(Console().width, 150))
    console.print(
        f"[bold]{summary['file']}[/bold]: editor [cyan]{summary['editor']}[/cyan], Attr_auto by the "
        f"[cyan]{summary['verifier']}[/cyan] verifier's P(attributable), {summary['n']} lines, "
        f"{summary['seconds_per_line']} s/line (verify + edit p50 {summary.get('revise_ms_p50')} ms, "
        f"p95 {summary.get('revise_ms_p95')} ms)"
    )
    table = Table("set", "n", "Attr before", "Attr after", "Pres", "F1_AP before", "F1_AP", "edited", "good",
                  "bad", "huge", "unnec.", "exact fix")  # fmt: skip
    rows = [("all", summary)] + list(summary.get("by_type", {}).items())
    for name, s in rows:
        rates = s["class_rate_edited"]
        table.add_row(
            name, str(s["n"]), f"{s['attr_before']:.3f}", f"{s['attr_after']:.3f}", f"{s['preservation']:.3f}",
            f"{s['f1_ap_before']:.3f}", f"{s['f1_ap']:.3f}", f"{s['edited']:.2f}",
            *(f"{rates[c]:.2f}" for c in ("good", "bad", "huge", "unnecessary")),
            f"{s['exact_fix']:.3f}" if "exact_fix" in s else "-",
        )  # fmt: skip
    console.print(table)
    console.print("class rates are shares of the edited lines; exact fix is over lines that give 'original'")

def eval_verifier(
    backend: Annotated[list[str] | None, typer.Option(help=_BACKEND_HELP)] = None,
    model: Annotated[Path | None, typer.Option(help=_MODEL_HELP)] = None,
    wice: Annotated[Path | None, typer.Option(help="WiCE claim_dev.jsonl")] = None,
    fever_symmetric: Annotated[Path | None, typer.Option(help="FEVER-Symmetric jsonl file or folder")] = None,
    limit: Annotated[int | None, typer.Option(help="first N examples of each set")] = None,
    data: RunData = [],
    synthetic: RunSynthetic = None,
    seed: DevSeed = None,
    dev_size: DevSize = None,
    latency_pairs: Annotated[int, typer.Option(help="dev pairs timed for latency (0: skip)")] = 200,
    threads: int = 2,
    out: Annotated[Path | None, typer.Option(help="also write the results here (JSON)")] = None,
) -> None:
    """Evaluate a verifier: balanced accuracy (attributable vs not) of each backend on WiCE and
    FEVER-Symmetric, the evidence windowed as in serving; with the training run's --data, the
    NLI model's 3-way accuracy on its held-out dev split and CPU latency per pair."""
    import asyncio

    from middleware.composition.backends import build_verifier
    from middleware.evaluation import verifier as ev
    from middleware.training.claim_sets import load_fever_symmetric, load_wice
    from middleware.training.shipping import OnnxNli
    from middleware.training.verifier_data import run_dev_split
    from onnx_models.sources import BUNDLED, BUNDLED_DIRS

    sets = []
    if wice:
        sets.append(("wice", load_wice(wice)[:limit]))
    if fever_symmetric:
        sets.append(("fever_symmetric", load_fever_symmetric(fever_symmetric)[:limit]))
    if not sets and not data:
        raise typer.BadParameter("give --wice and/or --fever-symmetric, or the run's --data")
    settings = load_settings(**{"runtime.intra_op_threads": threads,
                                "runtime.nli_model": str(model) if model is not None else None})
    results: dict = {"model": settings.runtime.nli_model}

    async def run_backends() -> dict:
        scores: dict = {}
        for name in (backend or [settings.pipeline.verifier]) if sets else []:
            verifier = build_verifier(settings, name)
            for dataset, examples in sets:
                result = await ev.evaluate(verifier, examples, dataset)
                scores.setdefault(verifier.name, {})[dataset] = result.summary()
        return scores

    results["backends"] = asyncio.run(run_backends())
    if data:
        nli_model = settings.runtime.nli_model
        directory = model or (BUNDLED_DIRS["nli"] if nli_model == BUNDLED else Path(nli_model))
        scorer = OnnxNli(directory, threads)
        results["max_length"] = scorer.manifest.max_length
        dev_pairs = run_dev_split(directory, data, synthetic, seed, dev_size)
        results["dev"] = ev.evaluate_dev(scorer, dev_pairs)
        if latency_pairs:
            sample = random.Random(0).sample(dev_pairs, min(latency_pairs, len(dev_pairs)))
            results["latency"] = ev.measure_latency(scorer, [(p.premise, p.hypothesis) for p in sample])
    text = json.dumps(results, indent=2)
    if out:
        out.write_text(text + "\n", encoding="utf-8")
    typer.echo(text)

def eval_battery(
    backend: Annotated[str | None, typer.Option(help="slots, nli, hybrid or llm (default: settings pipeline.verifier)")] = None,
    data_root: Annotated[Path, typer.Option(help="folder holding dev-battery/, fever-symmetric/ and wice/")] = Path(
        "../shared/data"
    ),
    sets: Annotated[list[str], typer.Option("--set", help="a set to score (repeatable; default: all five)")] = [],
    split: Annotated[str, typer.Option(help="battery split: test (report) or train (tuning)")] = "test",
    limit: Annotated[int, typer.Option(help="seeded sample of at most this many items per set (0: all)")] = 400,
    seed: int = 13,
    threads: int = 2,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
    out: Annotated[Path | None, typer.Option(help="also write the JSON here")] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(help="an earlier --out JSON: exit 1 where the battery mean or a set's balanced accuracy drops below it"),
    ] = None,
    tolerance: Annotated[float, typer.Option(help="points of balanced accuracy a --baseline allows to lose")] = 1.0,
    ablate: Annotated[
        bool, typer.Option(help="hybrid: also score with each rule off, and with the hand cut-offs (paired bootstrap)")
    ] = False,
    e2e: Annotated[
        bool,
        typer.Option(help="instead: stream LFQA-Verification, ExpertQA and RAGTruth answers through factcheck serve "
                          "--demo-upstream, the verifier alone on the same sentences beside them"),
    ] = False,
    e2e_set: Annotated[
        list[str], typer.Option(help="--e2e: a set to stream (repeatable; default: lfqa_verification, expertqa, ragtruth)")
    ] = [],
    e2e_answers: Annotated[
        int | None, typer.Option(help="--e2e: answers per set, a seeded sample (0: all; default: 30, 30 and all of RAGTruth)")
    ] = None,
    e2e_mode: Annotated[list[str], typer.Option(help="--e2e: modes (repeatable)")] = ["annotate", "correct"],
    e2e_env: Annotated[
        list[str], typer.Option(help="--e2e: a setting for the server, NAME=VALUE (FACTCHECK_...; repeatable): an ablation")
    ] = [],
    e2e_alone: Annotated[bool, typer.Option(help="--e2e: also the verifier alone on the same sentences")] = True,
    e2e_dump: Annotated[
        Path | None, typer.Option(help="--e2e: write every gold sentence's outcome here (JSON lines)")
    ] = None,
    e2e_serve_from: Annotated[
        Path | None, typer.Option(help="--e2e: run the server of this checkout (an earlier commit, for before/after)")
    ] = None,
) -> None:
    """Score a verifier backend on the third-party battery (ExpertQA, LFQA-Verification,
    SummEdits test split) and FEVER-Symmetric / WiCE dev: balanced accuracy of attributable vs
    not, AUC of P(attributable), contradiction precision, the word-overlap baseline beside it."""
    import asyncio

    from middleware.composition.backends import build_verifier
    from middleware.evaluation import battery
    from middleware.training.claim_sets import ALL_SETS, BATTERY_SETS, load_set, sample

    if e2e:
        _eval_e2e(data_root, split, e2e_set, e2e_answers, e2e_mode, e2e_env, e2e_alone, e2e_serve_from, seed,
                  json_out, out, baseline, tolerance, e2e_dump)
        return
    names = sets or list(ALL_SETS)
    verifier = build_verifier(load_settings(**{"runtime.intra_op_threads": threads}), backend)
    samples = {
        name: sample(load_set(data_root, name), split if name in BATTERY_SETS else "test", limit or None, seed)
        for name in names
    }  # fmt: skip
    scored = asyncio.run(battery.score_sets(verifier, samples, log=lambda line: typer.echo(line, err=True)))
    rows = {name: s.metrics() for name, s in scored.items()}
    result = {
        "backend": verifier.name, "split": split, "limit": limit, "seed": seed, "sets": rows,
        "battery_mean": battery.mean_row(rows, BATTERY_SETS),
        "mean": battery.mean_row(rows, names),
    }  # fmt: skip
    if ablate:
        result["ablation"] = asyncio.run(battery.ablate(verifier, samples, scored, log=lambda line: typer.echo(line, err=True)))
    text = json.dumps(result, indent=2)
    if out:
        out.write_text(text + "\n", encoding="utf-8")
    if json_out:
        typer.echo(text)
    else:
        typer.echo(battery.render_table(rows | {"battery mean": result["battery_mean"], "mean (all)": result["mean"]}))
        if ablate:
            typer.echo("\n" + battery.render_ablation(result["ablation"]))
    if baseline is not None:
        _gate(battery.regressions(result, json.loads(baseline.read_text(encoding="utf-8")), tolerance),
              f"no set below {baseline} by more than {tolerance} points")


def _eval_e2e(data_root: Path, split: str, sets: list[str], limit: int | None, modes: list[str], env: list[str],
              alone: bool, serve_from: Path | None, seed: int, json_out: bool, out: Path | None,
              baseline: Path | None, tolerance: float, dump_to: Path | None = None) -> None:
    """``eval-battery --e2e``: stream, score, print, and gate against ``baseline``."""
    from middleware.evaluation import battery_e2e

    unknown = [s for s in sets if s not in battery_e2e.E2E_SETS]
    if unknown:
        raise typer.BadParameter(f"unknown set {unknown[0]!r}; expected one of {', '.join(battery_e2e.E2E_SETS)}",
                                 param_hint="--e2e-set")
    settings = dict(item.split("=", 1) for item in env if "=" in item)
    if len(settings) != len(env):
        raise typer.BadParameter("give NAME=VALUE", param_hint="--e2e-env")
    results = asyncio.run(battery_e2e.run(
        data_root, limit, modes, seed, log=lambda line: typer.echo(line, err=True), serve_from=serve_from,
        sets=sets or battery_e2e.E2E_SETS, split=split, env=settings, alone=alone, dump_to=dump_to,
    ))  # fmt: skip
    if out:
        out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    typer.echo(json.dumps(results, indent=2) if json_out else battery_e2e.render(results))
    if baseline is not None:
        _gate(battery_e2e.regressions(results, json.loads(baseline.read_text(encoding="utf-8")), tolerance),
              f"no end-to-end figure worse than {baseline} by more than {tolerance} points")


def _gate(drops: list[str], passed: str) -> None:
    """A baseline's verdict: each regression on stderr and exit 1, else ``passed``."""
    for line in drops:
        typer.echo(f"REGRESSION {line}", err=True)
    if drops:
        raise typer.Exit(1)
    typer.echo(passed, err=True)
