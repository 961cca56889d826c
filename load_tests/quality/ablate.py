"""Each verifier rule's marginal effect on the planted benchmark: the benchmark run once as
configured and once with each rule off (``pipeline.rules.disabled``), and once with the hand
cut-offs in place of the learned decision (``pipeline.rules.decision: hand``). Its battery
side is ``factcheck eval-battery --ablate``: a rule earns its place there, on text nobody
here wrote; this says what it does for the project's own planted errors.

    python -m load_tests.quality.ablate [--limit N] [--json OUT]

With ``--gate``, the edit gate's rules instead (``pipeline.rules.gate_disabled``, one off at
a time): only the rows the configured run found contradicted are checked again, since no
other row reaches the editor and no gate rule changes a verdict; "refused" counts the rows
whose edit the rule refused in the configured run (the first rule to refuse is reported).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from load_tests.quality.data import load_rows
from load_tests.quality.planted import DATA, check_all
from middleware.composition import command_line_runner
from middleware.evaluation.planted import Result, score
from middleware.pipeline.verifiers.slots_verifier import RULES
from middleware.revise.gate_rules import GATE_RULES
from middleware.settings import Settings, load_settings
from middleware.types import Mode

FIGURES = ("recall", "exact_fix_rate", "wrong_edits", "edits")


def variants(settings: Settings) -> dict[str, Settings]:
    """The configured pipeline, each rule off alone, and the hand cut-offs."""
    rules = settings.pipeline.rules

    def with_rules(**update: Any) -> Settings:
        pipeline = settings.pipeline.model_copy(update={"rules": rules.model_copy(update=update)})
        return settings.model_copy(update={"pipeline": pipeline})

    off = rules.disabled_for(rules.decision == "learned")
    out = {"as configured": settings}
    out |= {f"without {rule}": with_rules(disabled=sorted(off | {rule})) for rule in RULES if rule not in off}
    out["hand cut-offs"] = with_rules(decision="hand")
    return out


def gate_variants(settings: Settings) -> dict[str, Settings]:
    """Each edit gate rule off alone, beside what is configured off already."""
    rules = settings.pipeline.rules
    out = {}
    for rule in GATE_RULES:
        if rule not in rules.gate_disabled:
            off = rules.model_copy(update={"gate_disabled": [*rules.gate_disabled, rule]})
            out[f"without {rule}"] = settings.model_copy(
                update={"pipeline": settings.pipeline.model_copy(update={"rules": off})}
            )
    return out


def refused_by(results: list[Result], rule: str) -> int:
    """Rows whose edit ``rule`` refused (``planted._reason`` names the refusing rule)."""
    return sum(1 for r in results if r.reason is not None and f" by {rule}: " in r.reason)


def overall(metrics: dict[str, Any]) -> dict[str, Any]:
    o = metrics["overall"]
    true = metrics["per_kind"].get("true", {})
    return {k: o.get(k) for k in FIGURES} | {"false_alarm_rate": true.get("false_alarm_rate")}


def main(
    limit: Annotated[int | None, typer.Option(help="only the first N rows")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the figures here")] = None,
    gate: Annotated[bool, typer.Option(help="the edit gate's rules instead of the verifier's")] = False,
) -> None:
    logging.basicConfig(level="WARNING")
    rows = load_rows(DATA, limit)
    out: dict[str, dict[str, Any]] = {}
    print(f"| variant | {' | '.join(FIGURES)} | false alarm | refused |\n|---|{'---|' * (len(FIGURES) + 2)}")

    def report(name: str, results: list[Result], refused: int | None = None) -> None:
        out[name] = overall(score(rows, results)) | {"refused": refused}
        cells = " | ".join(f"{out[name][k]:.3f}" if isinstance(out[name][k], float) else str(out[name][k]) for k in FIGURES)
        print(f"| {name} | {cells} | {out[name]['false_alarm_rate']:.3f} | {'-' if refused is None else refused} |",
              flush=True)  # fmt: skip

    settings = load_settings()
    if not gate:
        for name, variant in variants(settings).items():
            report(name, asyncio.run(check_all(command_line_runner(variant), rows, Mode.CORRECT)))
    else:
        configured = asyncio.run(check_all(command_line_runner(settings), rows, Mode.CORRECT))
        report("as configured", configured)
        contradicted = [row for row, r in zip(rows, configured, strict=True) if r.verdict == "contradictory"]
        for name, variant in gate_variants(settings).items():
            again = {r.id: r for r in asyncio.run(check_all(command_line_runner(variant), contradicted, Mode.CORRECT))}
            report(name, [again.get(r.id, r) for r in configured], refused_by(configured, name.removeprefix("without ")))
    if json_out:
        json_out.write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    typer.run(main)
