"""Each edit gate rule's effect on third-party text: FEVER-Symmetric dev claims (people wrote
them and judged them against their Wikipedia evidence sentence) edited by the configured
editor behind the gate, as ``factcheck edit`` would, once as configured and once with each
gate rule off (``pipeline.rules.gate_disabled``).

A SUPPORTS claim that gets edited is a wrong edit: its evidence states it as written. A
REFUTES claim that gets edited is a proposed fix, with no gold fix to score it by: the
changes each rule's removal adds are printed to be read.

    python -m load_tests.quality.gate_fever [--data-root ../shared/data] [--limit N] [--json OUT]
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from load_tests.quality.ablate import gate_variants
from middleware.pipeline.verifiers.base import Verifier, passages_from_texts
from middleware.composition.editor import build_editor, build_eval_verifier
from middleware.revise.guards import EDITABLE_LABELS
from middleware.settings import Settings, load_settings
from middleware.types import Verdict

FEVER = Path("fever-symmetric") / "fever_symmetric_dev.jsonl"


def load_claims(data_root: Path, limit: int | None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (data_root / FEVER).read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows[:limit] if limit else rows


async def verdicts(verifier: Verifier, rows: list[dict[str, Any]]) -> list[Verdict]:
    """Each claim's verdict against its evidence sentence: the same under every gate variant."""
    return [await verifier.verify(row["claim"], passages_from_texts([row["evidence"]])) for row in rows]


async def edited(settings: Settings, verifier: Verifier, rows: list[dict[str, Any]], found: list[Verdict]) -> dict[str, str]:
    """Claim id -> edited claim, for the claims the editor and gate changed."""
    editor = build_editor(settings, verifier)
    out = {}
    for row, verdict in zip(rows, found, strict=True):
        if verdict.label in EDITABLE_LABELS:
            result = await editor.edit(row["claim"], verdict, passages_from_texts([row["evidence"]]))
            if result.changed:
                out[row["id"]] = result.text
    return out


def figures(rows: list[dict[str, Any]], changed: dict[str, str]) -> dict[str, int]:
    labels = {row["id"]: row["label"] for row in rows}
    return {
        "wrong_edits": sum(1 for i in changed if labels[i] == "SUPPORTS"),
        "refutes_edited": sum(1 for i in changed if labels[i] == "REFUTES"),
    }


def main(
    data_root: Annotated[Path, typer.Option(help="folder holding fever-symmetric/")] = Path("../shared/data"),
    limit: Annotated[int | None, typer.Option(help="only the first N claims")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the figures and the changes here")] = None,
) -> None:
    logging.basicConfig(level="WARNING")
    rows = load_claims(data_root, limit)
    settings = load_settings()
    verifier = build_eval_verifier(settings)
    found = asyncio.run(verdicts(verifier, rows))
    claims = {row["id"]: row for row in rows}
    base = asyncio.run(edited(settings, verifier, rows, found))
    editable = sum(1 for v in found if v.label in EDITABLE_LABELS)
    print(f"{len(rows)} claims, {editable} judged contradicted or unsupported (the editor's to try)\n")
    print("| variant | wrong edits (SUPPORTS edited) | REFUTES edited |\n|---|---|---|")
    out: dict[str, Any] = {"as configured": figures(rows, base) | {"changes": base}}
    print(f"| as configured | {out['as configured']['wrong_edits']} | {out['as configured']['refutes_edited']} |")
    for name, variant in gate_variants(settings).items():
        changed = asyncio.run(edited(variant, verifier, rows, found))
        added = {i: t for i, t in changed.items() if base.get(i) != t}
        out[name] = figures(rows, changed) | {"added": added}
        print(f"| {name} | {out[name]['wrong_edits']} | {out[name]['refutes_edited']} |", flush=True)
        for i, text in added.items():
            row = claims[i]
            print(f"    {row['label']}: {row['claim']!r}\n      -> {text!r}\n      evidence: {row['evidence']!r}")
    if json_out:
        json_out.write_text(json.dumps(out, ensure_ascii=False, indent=2), encoding="utf-8")


if __name__ == "__main__":
    typer.run(main)
