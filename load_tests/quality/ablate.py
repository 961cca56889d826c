"""Each verifier rule's marginal effect on the planted benchmark: the benchmark run once as
configured and once with each rule off (``pipeline.rules.disabled``), and once with the hand
cut-offs in place of the learned decision (``pipeline.rules.decision: hand``). Its battery
side is ``factcheck eval-battery --ablate``: a rule earns its place there, on text nobody
here wrote; this says what it does for the project's own planted errors.

    python -m load_tests.quality.ablate [--limit N] [--json OUT]
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from load_tests.quality.data import load_rows
from load_tests.quality.planted import DATA, build_runner, check_all
from load_tests.quality.scoring import score
from middleware.pipeline.verifiers.slots_verifier import RULES
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


def overall(metrics: dict[str, Any]) -> dict[str, Any]:
    o = metrics["overall"]
    true = metrics["per_kind"].get("true", {})
    return {k: o.get(k) for k in FIGURES} | {"false_alarm_rate": true.get("false_alarm_rate")}


def main(
    limit: Annotated[int | None, typer.Option(help="only the first N rows")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the figures here")] = None,
) -> None:
    logging.basicConfig(level="WARNING")
    rows = load_rows(DATA, limit)
    out: dict[str, dict[str, Any]] = {}
    print(f"| variant | {' | '.join(FIGURES)} | false alarm |\n|---|{'---|' * (len(FIGURES) + 1)}")
    for name, settings in variants(load_settings()).items():
        results = asyncio.run(check_all(build_runner(settings), rows, Mode.CORRECT))
        out[name] = overall(score(rows, results))
        cells = " | ".join(f"{out[name][k]:.3f}" if isinstance(out[name][k], float) else str(out[name][k]) for k in FIGURES)
        print(f"| {name} | {cells} | {out[name]['false_alarm_rate']:.3f} |", flush=True)
    if json_out:
        json_out.write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    typer.run(main)
