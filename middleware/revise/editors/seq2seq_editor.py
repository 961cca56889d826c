"""The PURR-style editor: a T5-family model with fusion-in-decoder. The claim is encoded
with each of up to four evidence snippets separately (one encoder pass per snippet), the
encoder states and masks are concatenated, and one greedy decode writes the revised claim.
The model is served by the runtime (``OnnxSeq2Seq``): a hub id or a local checkpoint is
exported to ONNX on first use, an export directory is used as it is.

The input template must match training; ``train-editor`` writes it to ``editor.json``
next to the checkpoint and the export, and the editor reads it from there when present."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from middleware.evidence.lexical import terms
from middleware.pipeline.verifiers.base import DetailedVerdict
from middleware.pipeline.editing import EditResult, ranked_evidence
from middleware.revise.edits import EditBuffer, diff_edits, with_tags
from middleware.types import Passage, Verdict

log = logging.getLogger(__name__)

FID_TEMPLATE = "statement: {claim} evidence: {evidence}"
EDITOR_CONFIG = "editor.json"


class FusedGenerator(Protocol):
    """What the editor needs from a served seq2seq model (``runtime.OnnxSeq2Seq``)."""

    def generate_fused(self, groups: Sequence[Sequence[str]], max_new_tokens: int = 64) -> list[str]: ...


def read_template(spec: str | Path | None) -> str:
    """The input template saved with a trained editor, else the default."""
    if spec is not None:
        path = Path(spec) / EDITOR_CONFIG
        if path.is_file():
            return str(json.loads(path.read_text(encoding="utf-8")).get("template", FID_TEMPLATE))
    return FID_TEMPLATE


def fid_inputs(claim: str, snippets: Sequence[str], template: str = FID_TEMPLATE) -> list[str]:
    """One encoder input per snippet (at least one, with empty evidence if there is none)."""
    return [template.format(claim=claim, evidence=s) for s in (snippets or [""])]


class Seq2SeqEditor:
    name = "seq2seq"

    def __init__(
        self,
        model: FusedGenerator,
        *,
        template: str = FID_TEMPLATE,
        max_evidence: int = 4,
        max_chars: int = 1200,
        max_new_tokens: int = 96,
    ) -> None:
        self.model = model
        self.template = template
        self.max_evidence = max_evidence
        self.max_chars = max_chars
        self.max_new_tokens = max_new_tokens

    async def edit(
        self,
        sentence: str,
        verdict: DetailedVerdict | Verdict,
        evidence: list[Passage],
        context: str | None = None,
    ) -> EditResult:
        core = sentence.strip()
        lead = len(sentence) - len(sentence.lstrip())
        chosen = ranked_evidence(core, verdict, evidence, self.max_evidence)
        inputs = fid_inputs(core, [evidence[i].text[: self.max_chars] for i in chosen], self.template)
        [output] = await asyncio.to_thread(self.model.generate_fused, [inputs], self.max_new_tokens)
        output = " ".join(output.split())
        if not output or output == core:
            return EditResult.unchanged(sentence, "the model kept the sentence", self.name)
        buffer = EditBuffer(sentence)
        for change in reversed(with_tags(core, diff_edits(core, output))):
            index = _grounding(change.replacement, chosen, evidence)
            buffer.replace(
                lead + change.start, lead + change.end, change.replacement, tag=change.tag, evidence_index=index,
                evidence_id=evidence[index].id if index is not None else None,
                evidence=evidence[index].text if index is not None else None,
            )  # fmt: skip
        return buffer.result(self.name, "the model's output differs only in spacing")

def _grounding(replacement: str, chosen: list[int], evidence: list[Passage]) -> int | None:
    """The chosen passage that contains the replacement (else shares most of its terms)."""
    if not chosen:
        return None
    text = replacement.strip().lower()
    for i in chosen:
        if text and text in evidence[i].text.lower():
            return i
    wanted = set(terms(replacement))
    return max(chosen, key=lambda i: len(wanted & set(terms(evidence[i].text))))
